"""Dynamic batching in the PyTorch inference container (TorchServe) as the model's environment:
one spelling for the construct's Batching prop (constructs/endpoint_model.py) and for `render`'s
rendering of a component's model (endpoints/hosting_requests.py)."""

from __future__ import annotations

from sagestack.endpoints.models import BatchingSpec


def batching_environment(
    *,
    max_batch_size: int,
    max_delay_ms: int,
    workers: int | None,
    default_workers: int,
    threads_per_worker: int,
    response_timeout_s: int,
    handler: str | None,
) -> dict[str, str]:
    """SAGEMAKER_TS_* and the model server's workers (default: `default_workers`, since setting any
    SAGEMAKER_TS_ variable would otherwise drop the container to one worker), the threads per
    worker, and the TorchServe handler when one is named."""
    if max_batch_size < 1 or threads_per_worker < 1 or (workers or 1) < 1:
        raise ValueError("Batching: max_batch_size, workers and threads_per_worker must be >= 1")
    count = str(workers or max(1, default_workers))
    env = {
        "SAGEMAKER_TS_BATCH_SIZE": str(max_batch_size),
        "SAGEMAKER_TS_MAX_BATCH_DELAY": str(max_delay_ms),
        "SAGEMAKER_TS_MIN_WORKERS": count,
        "SAGEMAKER_TS_MAX_WORKERS": count,
        "SAGEMAKER_TS_RESPONSE_TIMEOUT": str(response_timeout_s),
        "SAGEMAKER_MODEL_SERVER_WORKERS": count,
        "OMP_NUM_THREADS": str(threads_per_worker),
        "SAGESTACK_SERVE_THREADS": str(threads_per_worker),
    }
    if handler:
        env["TS_DEFAULT_SERVICE_HANDLER"] = handler
    return env


def spec_batching_environment(b: BatchingSpec, default_workers: int) -> dict[str, str]:
    """An endpoint's `batching:` as the environment (handler 'batched': the model's own inference.py
    answering a batch with one forward pass)."""
    return batching_environment(
        max_batch_size=b.max_batch_size,
        max_delay_ms=b.max_delay_ms,
        workers=b.workers,
        default_workers=default_workers,
        threads_per_worker=b.threads_per_worker,
        response_timeout_s=b.response_timeout,
        handler="inference:handle" if b.handler == "batched" else None,
    )
