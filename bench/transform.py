#!/usr/bin/env python3
"""A batch transform's batching, measured in one run: `sagestack local transform` over the digits
(1,797 JSON Lines records, the example's filters and join) with MultiRecord (as many records per
request as fit MaxPayloadInMB) against SingleRecord (one request per record), alternating, three
repetitions each; records/s and the ratio. The model is the example's CNN with seeded weights, as
bench/serve.py builds it. --smoke: one repetition over 200 records (the tests run it so that the
benchmark cannot rot; its figures mean nothing).
Usage: python bench/transform.py [--repeat N] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from serve import build_model_dir

from sagestack.local.serving.handlers import load_handlers
from sagestack.local.serving.transform import run_transform
from sagestack.transforms.models import TransformSpec

EXAMPLE = {
    "model_package": "arn:aws:sagemaker:us-east-1:111111111111:model-package/digits-dev/1",
    "instance_type": "ml.m5.xlarge",
    "content_type": "application/jsonlines",
    "accept": "application/jsonlines",
    "input_filter": "$.features",
    "join_source": "Input",
    "output_filter": "$['id','SageMakerOutput']",
}


def main() -> None:
    import torch
    from sklearn.datasets import load_digits  # type: ignore[import-untyped]

    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="one repetition, 200 records (seconds)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    x, _ = load_digits(return_X_y=True)
    if args.smoke:
        args.repeat, x = 1, x[:200]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        handlers = load_handlers(build_model_dir(root / "model"))
        (root / "in").mkdir()
        lines = [
            json.dumps({"id": i, "features": (x[i] / 16).reshape(1, 8, 8).tolist()}) for i in range(len(x))
        ]
        (root / "in" / "digits.jsonl").write_text("\n".join(lines) + "\n")
        rates: dict[str, list[float]] = {"SingleRecord": [], "MultiRecord": []}
        requests: dict[str, int] = {}
        for i in range(args.repeat):
            for strategy in rates:
                spec = TransformSpec.model_validate({**EXAMPLE, "batch_strategy": strategy})
                start = time.perf_counter()
                result = run_transform(handlers, spec, root / "in", root / f"out-{strategy}-{i}")
                seconds = time.perf_counter() - start
                assert not result.failed, result.failed[0].error
                rates[strategy].append(result.records / seconds)
                requests[strategy] = result.files[0].requests
    single, multi = (statistics.median(rates[k]) for k in ("SingleRecord", "MultiRecord"))
    print(f"records: {len(x)}; repetitions: {args.repeat}, alternating")
    print(f"SingleRecord: {single:8.0f} records/s ({requests['SingleRecord']} requests)")
    print(f"MultiRecord:  {multi:8.0f} records/s ({requests['MultiRecord']} request(s))")
    print(f"MultiRecord / SingleRecord: {multi / single:.1f}x")


if __name__ == "__main__":
    main()
