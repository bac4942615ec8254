"""An LLM endpoint of the spec, served here: which `llm:` (the endpoint's own, or one of its
components'), where its weights are locally (`weights.s3` under the local S3 root, as the cloud's
s3://<bucket>/<key>; made by local/llm/weights.py when absent), the container's schema and token
limits, and the server on a thread (tests, the demo, the bench) or in the foreground (the CLI)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagestack.core.deployment import LOCAL_BUCKET
from sagestack.llm.models import LlmSpec
from sagestack.llm.sizing import max_batch
from sagestack.local.llm.protocol import SCHEMA_OF, Limits, Schema
from sagestack.local.llm.server import LlmModelServer
from sagestack.local.llm.weights import build_weights, has_weights, load_weights
from sagestack.local.serving.s3_paths import endpoint_name, s3_root
from sagestack.local.serving.serve import BackgroundUvicorn
from sagestack.project.loader import LoadedSpec

# Sequences in one forward pass when neither the spec nor the container's variable says (the
# containers' own defaults, 128 to 256, are sized for GPUs; the local model runs on CPU)
DEFAULT_BATCH = 8


class LlmServeError(ValueError):
    pass


@dataclass(frozen=True)
class LocalLlm:
    endpoint: str  # the key served (an endpoint, or endpoint/component)
    name: str  # the endpoint's name, as the runtime API addresses it
    spec: LlmSpec
    weights: Path
    schema: Schema


def local_llm(loaded: LoadedSpec, key: str) -> LocalLlm:
    """The LLM `key` names: an endpoint with `llm:`, or `endpoint/component` (an endpoint with one
    LLM component may be named alone)."""
    endpoint, _, component = key.partition("/")
    ep = loaded.spec.endpoints.get(endpoint)
    if ep is None:
        raise LlmServeError(f"no endpoint '{endpoint}'")
    found = {n: c.llm for n, c in ep.components.items() if c.llm is not None}
    if component:
        spec = found.get(component)
    elif ep.llm is not None:
        spec = ep.llm
    else:
        spec = next(iter(found.values())) if len(found) == 1 else None
    if spec is None:
        hint = ", ".join(f"{endpoint}/{n}" for n in found) or "none here"
        raise LlmServeError(
            f"'{key}' names no LLM (llm: on the endpoint, or a component's; LLM components: {hint})"
        )
    schema = SCHEMA_OF.get(spec.container)
    if schema is None:
        raise LlmServeError(
            f"{spec.container} serves a model repository (Triton), which sagestack does not emulate locally; "
            "use an LMI, TGI, vLLM or SGLang container to try the model here"
        )
    s3 = spec.weights.s3
    bucket, _, prefix = (
        s3.removeprefix("s3://").partition("/") if s3.startswith("s3://") else (LOCAL_BUCKET, "", s3)
    )
    return LocalLlm(
        key, endpoint_name(loaded, endpoint), spec, s3_root(loaded) / bucket / prefix.strip("/"), schema
    )


def ensure_weights(llm: LocalLlm, on_progress: Callable[[int, int, float], None] = lambda *_: None) -> bool:
    """Make the weights when the folder has none. Returns whether they were made."""
    if has_weights(llm.weights):
        return False
    build_weights(llm.weights, on_progress=on_progress)
    return True


def model_server(llm: LocalLlm) -> LlmModelServer:
    return weights_server(
        llm.weights,
        llm.schema,
        name=llm.name,
        max_batch_size=max_batch(llm.spec)[0] or DEFAULT_BATCH,
        max_input_tokens=llm.spec.max_input_tokens,
        max_total_tokens=llm.spec.max_total_tokens,
    )


def weights_server(
    folder: Path,
    schema: Schema,
    *,
    name: str = "model",
    max_batch_size: int = DEFAULT_BATCH,
    max_input_tokens: int | None = None,
    max_total_tokens: int | None = None,
) -> LlmModelServer:
    """The server of the weights in `folder`, its token limits at most the model's positions."""
    model, tokenizer = load_weights(folder)
    positions = int(
        getattr(model.config, "n_positions", 0) or getattr(model.config, "max_position_embeddings", 0)
    )
    total = min(max_total_tokens or positions, positions)
    return LlmModelServer(
        model=model,
        tokenizer=tokenizer,
        schema=schema,
        limits=Limits(max_input_tokens=min(max_input_tokens or total - 1, total - 1), max_total_tokens=total),
        name=name,
        max_batch_size=max_batch_size,
    )


def uvicorn_server(app: Any, host: str, port: int) -> Any:
    import uvicorn

    config = uvicorn.Config(
        app, host=host, port=port, lifespan="on", log_level="warning", access_log=False, server_header=False
    )
    return uvicorn.Server(config)


def main(argv: list[str] | None = None) -> None:
    """`python -m sagestack.local.llm.endpoint WEIGHTS [--schema lmi] [--port P] [--max-batch N]
    [--threads T]`: serve a weights folder in a process of its own (what bench/llm_serve.py starts)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m sagestack.local.llm.endpoint")
    parser.add_argument("weights", type=Path)
    parser.add_argument("--schema", choices=sorted(set(SCHEMA_OF.values())), default="lmi")
    parser.add_argument("--name", default="model")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--max-batch", type=int, default=DEFAULT_BATCH, help="sequences in one forward pass")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    app = weights_server(args.weights, args.schema, name=args.name, max_batch_size=args.max_batch)
    uvicorn_server(app, args.host, args.port).run()


class BackgroundLlm(BackgroundUvicorn):
    """`with BackgroundLlm(app, port) as url:` — the LLM server on a thread."""

    def __init__(self, app: LlmModelServer, port: int, host: str = "127.0.0.1") -> None:
        self.app = app
        super().__init__(uvicorn_server(app, host, port), host, port)


if __name__ == "__main__":
    main()
