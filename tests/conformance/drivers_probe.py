"""The drivers conformance tier's entry point (copied as the code channel's train.py): records what
AWS's driver gave it, then does what a distributed script does first.

Writes output/data/probe-<rank>.json: its arguments, working directory, environment and the world
it met (under torchrun the ranks join one gloo process group and sum rank+1 over it, so the world
is the one that actually formed, not only the one the environment names). The world's rank 0
writes model/model.json. With `--fail_rank R`, rank R stops with an error (exit code 3) before
the collective, as a failing script does."""

import json
import os
import sys
from pathlib import Path

env = os.environ
rank = int(env.get("RANK") or env.get("OMPI_COMM_WORLD_RANK") or 0)
world = int(env.get("WORLD_SIZE") or env.get("OMPI_COMM_WORLD_SIZE") or 1)
argv = sys.argv[1:]
fail_rank = int(argv[argv.index("--fail_rank") + 1]) if "--fail_rank" in argv else None
record = {"argv": argv, "cwd": os.getcwd(), "env": dict(env), "rank": rank, "world": world}
out = Path(env.get("SM_OUTPUT_DATA_DIR", "/opt/ml/output/data"))
out.mkdir(parents=True, exist_ok=True)
if rank == fail_rank:
    (out / f"probe-{rank}.json").write_text(json.dumps(record, indent=1, sort_keys=True))
    sys.exit(f"probe: rank {rank} fails as asked (--fail_rank {fail_rank})")
if "MASTER_ADDR" in env and world > 1:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    total = torch.tensor([rank + 1])
    dist.all_reduce(total)
    record["met"] = {"size": dist.get_world_size(), "rank_sum": int(total.item())}
    dist.destroy_process_group()
(out / f"probe-{rank}.json").write_text(json.dumps(record, indent=1, sort_keys=True))
if rank == 0:
    model = Path(env.get("SM_MODEL_DIR", "/opt/ml/model"))
    (model / "model.json").write_text(json.dumps({"world": world, "argv": argv}))
