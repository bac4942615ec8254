"""The request and response schemas of the LLM containers, as `sagestack local serve` answers them:

- LMI (djl-lmi, djl-tensorrtllm, djl-neuronx; docs.djl.ai "LMI input/output schema"):
  `{"inputs": str, "parameters": {...}, "stream": bool}` → `{"generated_text": str}`; streamed as
  JSON lines `{"token": {"id", "text", "log_prob"}, "generated_text": null}`, the last line with the
  whole text. Errors: 400 `{"code", "type", "message"}`.
- TGI (huggingface-llm, huggingface-llm-neuronx; TGI's OpenAPI schema): the same request →
  `[{"generated_text": str}]`; streamed as server-sent events `data:{"index", "token": {"id",
  "text", "logprob", "special"}, "generated_text", "details"}`. Errors: 422 (validation) or 400
  `{"error", "error_type"}`.
- The OpenAI-style routes the containers also take (TGI's Messages API, LMI's chat completions,
  AWS's vLLM and SGLang images): `{"messages": [{"role", "content"}], "max_tokens", "temperature",
  "top_p", "stream"}` → `chat.completion` (streamed: `chat.completion.chunk` events, then
  `data: [DONE]`); the vLLM and SGLang images also take `{"prompt": str}` → `text_completion`.

Parameters the containers do not know are ignored, as they ignore them; a known one of the wrong
type or out of range, a prompt over the token limits, or a body that is not JSON is the client's
mistake, answered with the family's status and message — never a 500."""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from typing import Any, Literal

Schema = Literal["lmi", "tgi", "openai"]

SCHEMA_OF: dict[str, Schema] = {
    "djl-lmi": "lmi",
    "djl-tensorrtllm": "lmi",
    "djl-neuronx": "lmi",
    "huggingface-llm": "tgi",
    "huggingface-llm-neuronx": "tgi",
    "huggingface-vllm": "openai",
    "vllm": "openai",
    "sglang": "openai",
}
DEFAULT_NEW_TOKENS = {"lmi": 30, "tgi": 20, "openai": 16}


class RequestError(Exception):
    """The client's mistake: `status` and the family's error body."""

    def __init__(self, schema: Schema, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.schema = schema
        self.status = status or (422 if schema == "tgi" else 400)
        self.message = message

    def body(self) -> bytes:
        return error_body(self.schema, self.status, self.message)


def error_body(schema: Schema, status: int, message: str) -> bytes:
    """The family's error body: a client's mistake (4xx) or the model's fault (500)."""
    fault = status >= 500
    if schema == "tgi":
        kind = "generation" if fault else "validation" if status == 422 else "bad_request"
        return json.dumps({"error": message, "error_type": kind}).encode()
    if schema == "openai":
        kind = "InternalServerError" if fault else "BadRequestError"
        return json.dumps({"object": "error", "message": message, "type": kind, "code": status}).encode()
    kind = "InternalServerException" if fault else "BadRequestException"
    return json.dumps({"code": status, "type": kind, "message": message}).encode()


def error_chunk(schema: Schema, g: Generation, status: int, message: str) -> bytes:
    """What ends a stream the model failed after it began: the error, framed as the stream's chunks."""
    body = error_body(schema, status, message)
    return body + b"\n" if schema == "lmi" and g.kind == "text" else b"data:" + body + b"\n\n"


@dataclass(frozen=True)
class Limits:
    max_input_tokens: int
    max_total_tokens: int


@dataclass
class Generation:
    """One request, parsed: the prompt's token ids and how to generate."""

    kind: Literal["text", "chat", "completion"]
    prompt_ids: list[int]
    max_new_tokens: int
    do_sample: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    stream: bool = False
    details: bool = False
    return_full_text: bool = False
    prompt_text: str = ""


U64_MAX, I64_MIN, I64_MAX = 2**64 - 1, -(2**63), 2**63 - 1


@dataclass(frozen=True)
class Bounds:
    """What a family's container accepts for a sampling parameter: low/high, each end open or not."""

    low: float
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False
    rule: str = ""

    def admits(self, value: float) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below


# TGI's router (validation.rs: temperature and top_k strictly positive, top_p > 0.0 and < 1.0, the
# seed a u64); vLLM (SamplingParams: temperature >= 0, 0 is greedy; top_p in (0, 1]; the OpenAI
# protocol's seed an int64); LMI takes TGI's parameters, its top_p as vLLM's.
_STRICTLY_POSITIVE = Bounds(0, low_open=True, rule="must be strictly positive")
_TOP_P = Bounds(0, 1, low_open=True, rule="must be > 0.0 and <= 1.0")
_U64 = Bounds(0, U64_MAX, rule=f"must be an integer from 0 to {U64_MAX} (u64)")
BOUNDS: dict[Schema, dict[str, Bounds]] = {
    "tgi": {
        "temperature": _STRICTLY_POSITIVE,
        "top_p": Bounds(0, 1, low_open=True, high_open=True, rule="must be > 0.0 and < 1.0"),
        "top_k": _STRICTLY_POSITIVE,
        "seed": _U64,
    },
    "lmi": {"temperature": _STRICTLY_POSITIVE, "top_p": _TOP_P, "top_k": _STRICTLY_POSITIVE, "seed": _U64},
    "openai": {
        "temperature": Bounds(0, rule="must be non-negative (0 is greedy decoding)"),
        "top_p": _TOP_P,
        "top_k": _STRICTLY_POSITIVE,
        "seed": Bounds(I64_MIN, I64_MAX, rule=f"must be an integer from {I64_MIN} to {I64_MAX} (int64)"),
    },
}


def _shown(value: Any) -> str:
    """A given value in a message: short, and never a walk of a nested one (it may nest 900 deep)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**40:
        return f"{str(value)[:20]}... ({len(str(abs(value)))} digits)"
    if value is None or isinstance(value, (bool, int, float, str)):
        text = json.dumps(value)
        return text if len(text) <= 60 else text[:57] + "..."
    return f"a JSON {'array' if isinstance(value, list) else 'object'}"


def _number(schema: Schema, params: dict[str, Any], name: str, kind: type, check: Any, rule: str) -> Any:
    value = params.get(name)
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or (kind is int and not isinstance(value, int))
    ):
        raise RequestError(
            schema, f"`{name}` must be {'an integer' if kind is int else 'a number'}, not {_shown(value)}"
        )
    try:  # JSON's 1e999 and Infinity are inf, its NaN is nan; a 400-digit integer is no float
        finite = math.isfinite(value)
    except OverflowError:
        finite = False
    if (kind is float and not finite) or not check(value):
        raise RequestError(schema, f"`{name}` {rule}. Given: {_shown(value)}")
    return float(value) if kind is float else value


def _bounded(schema: Schema, params: dict[str, Any], name: str, kind: type) -> Any:
    bounds = BOUNDS[schema][name]
    return _number(schema, params, name, kind, bounds.admits, bounds.rule)


def parse(schema: Schema, body: bytes, tokenizer: Any, limits: Limits) -> Generation:
    """The request `body` as a Generation, or the RequestError the container would answer."""
    try:
        request = json.loads(body)
    except (UnicodeDecodeError, ValueError) as e:
        raise RequestError(schema, f"the body is not JSON: {e}", status=400) from None
    except RecursionError:
        raise RequestError(
            schema, "the body nests deeper than JSON is read here (about 1,000 levels of [ and {)", status=400
        ) from None
    if not isinstance(request, dict):
        raise RequestError(schema, "the body must be a JSON object", status=400 if schema != "tgi" else 422)
    if "messages" in request:
        return _chat(schema, request, tokenizer, limits)
    key = "prompt" if schema == "openai" else "inputs"
    text = request.get(key)
    if not isinstance(text, str):
        raise RequestError(schema, f"`{key}` must be a string (the prompt), not {type(text).__name__}")
    if not text:
        raise RequestError(schema, f"`{key}` cannot be empty")
    if schema == "openai":
        params, kind = request, "completion"
    else:
        params, kind = request.get("parameters") or {}, "text"
        if not isinstance(params, dict):
            raise RequestError(schema, "`parameters` must be an object")
    new_name = "max_tokens" if schema == "openai" else "max_new_tokens"
    g = _generation(schema, kind, params, new_name, tokenizer.encode(text), limits)
    g.prompt_text = text
    g.stream = bool(request.get("stream", params.get("stream", False)))
    return g


def _chat(schema: Schema, request: dict[str, Any], tokenizer: Any, limits: Limits) -> Generation:
    messages = request["messages"]
    if (
        not isinstance(messages, list)
        or not messages
        or not all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in messages)
    ):
        raise RequestError(schema, "`messages` must be a non-empty list of {role, content} objects")
    roles = [m.get("role") for m in messages]
    unknown = [r for r in roles if not isinstance(r, str) or r not in ("system", "user", "assistant")]
    if unknown:
        raise RequestError(
            schema, f"a message's role must be system, user or assistant; given {_shown(unknown[0])}"
        )
    prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    g = _generation(schema, "chat", request, "max_tokens", tokenizer.encode(prompt), limits)
    g.prompt_text = prompt
    g.stream = bool(request.get("stream", False))
    return g


def _generation(
    schema: Schema, kind: Any, params: dict[str, Any], new_name: str, ids: list[int], limits: Limits
) -> Generation:
    new = _number(schema, params, new_name, int, lambda v: v >= 1, "must be strictly positive")
    temperature = _bounded(schema, params, "temperature", float)
    top_p = _bounded(schema, params, "top_p", float)
    top_k = _bounded(schema, params, "top_k", int)
    seed = _bounded(schema, params, "seed", int)
    stop = params.get("stop", params.get("stop_sequences", [])) or []
    if isinstance(stop, str):
        stop = [stop]
    if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
        raise RequestError(schema, "`stop` must be a string or a list of strings")
    sample = params.get("do_sample", temperature is not None or top_p is not None or top_k is not None)
    if temperature == 0:  # vLLM's greedy decoding (the other families refused 0 above)
        sample, temperature = False, None
    if not isinstance(sample, bool):
        raise RequestError(schema, f"`do_sample` must be true or false, not {sample!r}")
    max_new = new or DEFAULT_NEW_TOKENS[schema]
    if len(ids) > limits.max_input_tokens:
        raise RequestError(
            schema,
            f"Input validation error: `inputs` must have less than {limits.max_input_tokens} tokens. "
            f"Given: {len(ids)}",
        )
    if len(ids) + max_new > limits.max_total_tokens:
        raise RequestError(
            schema,
            f"Input validation error: `inputs` tokens + `{new_name}` must be <= {limits.max_total_tokens}. "
            f"Given: {len(ids)} `inputs` tokens and {max_new} `{new_name}`",
        )
    return Generation(
        kind=kind,
        prompt_ids=ids,
        max_new_tokens=max_new,
        do_sample=sample,
        temperature=temperature or 1.0,
        top_p=top_p or 1.0,
        top_k=top_k or 0,
        seed=seed,
        stop=stop,
        details=bool(params.get("details", False)),
        return_full_text=bool(params.get("return_full_text", False)),
    )


@dataclass(frozen=True)
class Token:
    id: int
    text: str
    logprob: float


def content_type(schema: Schema, g: Generation, streamed: bool) -> str:
    if not streamed:
        return "application/json"
    return "application/jsonlines" if schema == "lmi" and g.kind == "text" else "text/event-stream"


def whole(schema: Schema, g: Generation, text: str, tokens: int, finish: str, model: str) -> bytes:
    """The buffered answer."""
    full = g.prompt_text + text if g.return_full_text else text
    usage = {
        "prompt_tokens": len(g.prompt_ids),
        "completion_tokens": tokens,
        "total_tokens": len(g.prompt_ids) + tokens,
    }
    if g.kind == "chat":
        return json.dumps(
            {
                "id": f"chatcmpl-{time.time_ns()}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": _openai(finish),
                    }
                ],
                "usage": usage,
            }
        ).encode()
    if g.kind == "completion":
        return json.dumps(
            {
                "id": f"cmpl-{time.time_ns()}",
                "object": "text_completion",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "text": text, "finish_reason": _openai(finish)}],
                "usage": usage,
            }
        ).encode()
    answer: dict[str, Any] = {"generated_text": full}
    if g.details:
        answer["details"] = {"finish_reason": finish, "generated_tokens": tokens, "seed": g.seed}
    return json.dumps([answer] if schema == "tgi" else answer).encode()


def chunk(schema: Schema, g: Generation, i: int, token: Token, model: str) -> bytes:
    """One streamed token, framed as the family streams it."""
    if g.kind in ("chat", "completion"):
        delta = {"role": "assistant", "content": token.text} if i == 0 else {"content": token.text}
        choice = (
            {"index": 0, "delta": delta, "finish_reason": None}
            if g.kind == "chat"
            else {"index": 0, "text": token.text, "finish_reason": None}
        )
        obj = "chat.completion.chunk" if g.kind == "chat" else "text_completion"
        return _sse(
            {
                "id": f"{g.kind}-{id(g)}",
                "object": obj,
                "created": int(time.time()),
                "model": model,
                "choices": [choice],
            }
        )
    if schema == "lmi":
        line = {
            "token": {"id": token.id, "text": token.text, "log_prob": token.logprob},
            "generated_text": None,
        }
        return json.dumps(line).encode() + b"\n"
    return _sse(
        {
            "index": i,
            "token": {"id": token.id, "text": token.text, "logprob": token.logprob, "special": False},
            "generated_text": None,
            "details": None,
            "top_tokens": None,
        }
    )


def last(schema: Schema, g: Generation, text: str, tokens: int, finish: str, model: str) -> bytes:
    """What ends the stream: the whole text (LMI, TGI) or the finish reason and [DONE] (OpenAI)."""
    if g.kind in ("chat", "completion"):
        obj = "chat.completion.chunk" if g.kind == "chat" else "text_completion"
        choice: dict[str, Any] = {"index": 0, "finish_reason": _openai(finish)}
        if g.kind == "chat":
            choice["delta"] = {}
        else:
            choice["text"] = ""
        return (
            _sse(
                {
                    "id": f"{g.kind}-{id(g)}",
                    "object": obj,
                    "created": int(time.time()),
                    "model": model,
                    "choices": [choice],
                }
            )
            + b"data: [DONE]\n\n"
        )
    details = {"finish_reason": finish, "generated_tokens": tokens, "seed": g.seed}
    full = g.prompt_text + text if g.return_full_text else text
    if schema == "lmi":
        return json.dumps({"token": None, "generated_text": full, "details": details}).encode() + b"\n"
    return _sse(
        {"index": tokens, "token": None, "generated_text": full, "details": details, "top_tokens": None}
    )


def _sse(data: dict[str, Any]) -> bytes:
    return b"data:" + json.dumps(data).encode() + b"\n\n"


def _openai(finish: str) -> str:
    return "length" if finish == "length" else "stop"
