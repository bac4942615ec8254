"""The conformance tier's entry point: records what the script was given, then runs train.py.

Copied next to training_src's train.py; writes output/data/probe-<rank>.json with its arguments,
working directory and environment, so the toolkit's run and the local run can be compared."""

import json
import os
import runpy
import sys
from pathlib import Path

rank = os.environ.get("RANK") or os.environ.get("OMPI_COMM_WORLD_RANK") or "0"
out = Path(os.environ.get("SM_OUTPUT_DATA_DIR", "/opt/ml/output/data"))
out.mkdir(parents=True, exist_ok=True)
(out / f"probe-{rank}.json").write_text(
    json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ)}, indent=1, sort_keys=True)
)
script = str(Path(__file__).with_name("train.py"))
sys.argv = [script, *sys.argv[1:]]
runpy.run_path(script, run_name="__main__")
