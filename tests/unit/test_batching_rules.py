"""endpoint-batching-handler: a batching endpoint names inference.py's handle(), so the model must have one."""

from __future__ import annotations

from tests.conftest import MINIMAL, REPO
from tests.unit.test_rules import findings

ENDPOINT = """
endpoints:
  digits:
    model: {from: classifier}
    instance_type: ml.c5.xlarge
    batching: {max_batch_size: 16, max_delay_ms: 5%s}
"""


def test_endpoint_batching_handler(project):
    spec = MINIMAL + ENDPOINT % ""
    message = (
        "endpoints.digits.batching.handler: batching.handler is 'batched' but training_src/inference.py %s: "
        "TorchServe would fail to load the model; add one (the example's training_src/inference.py has a "
        "handle() over its input_fn / predict_fn / output_fn), or set handler: toolkit to keep the "
        "container's handler (one forward pass per request)"
    )
    assert findings(project, "endpoint-batching-handler", spec) == [message % "does not exist"]
    project.write("training_src/inference.py", "def model_fn(model_dir):\n    return None\n")
    assert findings(project, "endpoint-batching-handler", spec) == [
        message % "defines no handle(data, context)"
    ]
    assert findings(project, "endpoint-batching-handler", MINIMAL + ENDPOINT % ", handler: toolkit") == []
    project.write("training_src/inference.py", (REPO / "training_src" / "inference.py").read_text())
    assert findings(project, "endpoint-batching-handler", spec) == []
    assert findings(project, "endpoint-batching-handler", MINIMAL) == []  # no endpoint, nothing to check
