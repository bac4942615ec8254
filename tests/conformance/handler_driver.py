"""Drive training_src/inference.py through AWS's PyTorch inference handler, as the container does.

Run as a script (a process of its own, like a TorchServe worker: PYTHONPATH holds model_dir/code,
SAGEMAKER_PROGRAM names the module): `python handler_driver.py MODEL_DIR CASES.json RESULTS.json`.
Each case is {"body": base64, "headers": {...}}; each result {"status", "content_type", "body": base64}.
The context object plays TorchServe's: system properties, request headers, response status and type.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

from sagemaker_pytorch_serving_container.handler_service import HandlerService


class RequestProcessor:
    def __init__(self, headers: dict[str, str]) -> None:
        self.headers = headers

    def get_request_properties(self) -> dict[str, str]:
        return self.headers


class Context:
    def __init__(self, model_dir: str, headers: dict[str, str]) -> None:
        self.system_properties = {"model_dir": model_dir, "gpu_id": None}
        self.request_processor = [RequestProcessor(headers)]
        self.status = 200
        self.content_type: str | None = None

    def set_response_status(self, code: int = 200, phrase: str = "") -> None:
        self.status = code

    def set_response_content_type(self, idx: int, value: str) -> None:
        self.content_type = value


def main() -> None:
    model_dir, cases_path, results_path = sys.argv[1:4]
    cases = json.loads(Path(cases_path).read_text())
    service = HandlerService()
    service.initialize(Context(model_dir, {}))
    results = []
    for case in cases:
        context = Context(model_dir, case["headers"])
        out = service.handle([{"body": base64.b64decode(case["body"])}], context)[0]
        body = out if isinstance(out, bytes) else str(out).encode()
        results.append(
            {
                "status": context.status,
                "content_type": context.content_type,
                "body": base64.b64encode(body).decode(),
            }
        )
    with open(results_path, "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
