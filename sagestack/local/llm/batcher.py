"""Continuous batching for `sagestack local serve` of an LLM, as LMI's rolling batch and vLLM
schedule it: one engine thread owns the model; a request joins the running batch at the next step
boundary (its prompt prefilled in one forward pass with the others that arrived with it and have
its length), every step is one batched forward pass of the sequences running (left padding, an
attention mask and each sequence's own positions over one key/value cache), and a sequence leaves
the batch at its own end (EOS, a stop sequence, its max_new_tokens, its client gone). At most
`max_batch_size` sequences run at once — the container's OPTION_MAX_ROLLING_BATCH_SIZE,
MAX_CONCURRENT_REQUESTS, SM_VLLM_MAX_NUM_SEQS — the others wait their turn.

Under greedy decoding a request's tokens are the ones it gets alone: a padded position carries zero
keys and values and is masked out of attention, and the positions are the sequence's own
(tests/training_src/test_llm_batching.py checks batched == alone for prompts of several lengths).
Text is detokenized incrementally (a window of the last tokens, as TGI's router does), so a token
costs the same at the 500th as at the first. A token reaches the event loop once per step for all
streamed sequences together; a buffered one only its end."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sagestack.local.llm.protocol import Generation, Token

Deliver = Callable[[list[tuple[Any, Any]]], None]  # [(sink, item), ...], once per step


@dataclass
class Outcome:
    """How a generation ended: its text, its token count and why (eos_token, stop_sequence, length,
    or cancelled)."""

    text: str
    tokens: int
    finish: str


@dataclass
class Stats:
    generated: int = 0  # tokens, over every request
    cancelled: int = 0  # generations stopped because their client left
    steps: int = 0  # forward passes, prefills included
    widest: int = 0  # the most sequences in one forward pass


@dataclass(eq=False)
class Sequence:
    """One request in the engine: its generation, where its tokens go and how far it is."""

    g: Generation
    sink: Any  # what `deliver` hands its items to
    streamed: bool
    cancelled: threading.Event
    rng: Any = None
    ids: list[int] = field(default_factory=list)  # prompt and generated tokens
    text: str = ""
    finish: str = ""
    prefix: int = 0  # incremental detokenization: the window's start
    read: int = 0  # ... and where its text was last read to

    @property
    def generated(self) -> int:
        return len(self.ids) - len(self.g.prompt_ids)


class Batcher:
    """The engine: `submit` a generation, its items reach `deliver` from the engine's thread —
    for a streamed one a (Token, finish) per token, for every one an Outcome at its end, or the
    exception the model raised."""

    def __init__(self, model: Any, tokenizer: Any, deliver: Deliver, *, max_batch_size: int = 8) -> None:
        self.model, self.tokenizer, self.deliver = model, tokenizer, deliver
        self.max_batch_size = max(1, max_batch_size)
        self.eos = tokenizer.eos_token_id
        # a prefill needs the last position's logits only (as generate asks, where the model takes it)
        self._last_only = {"logits_to_keep": 1} if _takes(model, "logits_to_keep") else {}
        self.stats = Stats()
        self._cond = threading.Condition()
        self._waiting: list[Sequence] = []
        self._running: list[Sequence] = []
        self._cache: Any = None  # the running sequences' keys and values, left padded
        self._mask: Any = None  # [batch, cache length]: 1 where a sequence has a token
        self._thread: threading.Thread | None = None
        self._closed = False

    def submit(self, g: Generation, sink: Any, cancelled: threading.Event, *, streamed: bool) -> None:
        import torch

        rng = torch.Generator().manual_seed(g.seed) if g.do_sample and g.seed is not None else None
        seq = Sequence(g, sink, streamed, cancelled, rng, list(g.prompt_ids))
        seq.prefix = seq.read = len(seq.ids)
        with self._cond:
            if self._closed:
                raise RuntimeError("the model server is shutting down")
            self._waiting.append(seq)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="llm-batcher", daemon=True)
                self._thread.start()
            self._cond.notify()

    def close(self) -> None:
        """Stop the engine's thread (the server's shutdown); what still ran ends with an error. A
        later `submit` starts it again."""
        with self._cond:
            self._closed, thread = True, self._thread
            self._cond.notify()
        if thread is not None:
            thread.join(timeout=10)
        with self._cond:
            self._closed, self._thread = False, None

    # ---- the engine's thread

    def _loop(self) -> None:
        import torch

        with torch.inference_mode():
            while True:
                with self._cond:
                    while not self._waiting and not self._running and not self._closed:
                        self._cond.wait()
                    if self._closed:
                        gone = RuntimeError("the model server shut down")
                        self.deliver([(seq.sink, gone) for seq in self._waiting + self._running])
                        self._waiting, self._running, self._cache, self._mask = [], [], None, None
                        return
                    room = self.max_batch_size - len(self._running)
                    joining, self._waiting = self._waiting[:room], self._waiting[room:]
                if joining:
                    self._join(joining)
                if self._running:
                    self._step()

    def _join(self, joining: list[Sequence]) -> None:
        """Prefill the newcomers (those of one prompt length in one forward pass), pick each one's
        first token, and merge their keys and values into the running batch's."""
        import torch

        by_length: dict[int, list[Sequence]] = {}
        for seq in joining:
            by_length.setdefault(len(seq.ids), []).append(seq)
        for length, group in by_length.items():
            ids = torch.tensor([seq.ids for seq in group])
            mask = torch.ones(len(group), length, dtype=torch.long)
            try:
                out = self.model(
                    input_ids=ids,
                    attention_mask=mask,
                    position_ids=torch.arange(length).expand(len(group), length),
                    use_cache=True,
                    **self._last_only,
                )
            except Exception as e:
                self._fail(group, e)
                continue
            self._count(len(group))
            self._merge(group, out.past_key_values, mask)
            self._advance(group, out.logits[:, -1])

    def _step(self) -> None:
        """One token for every running sequence: one forward pass of the batch."""
        import torch

        batch = self._running
        ids = torch.tensor([[seq.ids[-1]] for seq in batch])
        positions = torch.tensor([[len(seq.ids) - 1] for seq in batch])
        mask = torch.cat([self._mask, torch.ones(len(batch), 1, dtype=torch.long)], dim=1)
        try:
            out = self.model(
                input_ids=ids,
                attention_mask=mask,
                position_ids=positions,
                past_key_values=self._cache,
                use_cache=True,
            )
        except Exception as e:
            self._fail(list(batch), e)
            return
        self._count(len(batch))
        self._cache, self._mask = out.past_key_values, mask
        self._advance(batch, out.logits[:, -1])

    def _count(self, width: int) -> None:
        self.stats.steps += 1
        self.stats.widest = max(self.stats.widest, width)

    def _advance(self, batch: list[Sequence], logits: Any) -> None:
        """Each sequence's next token from its row of `logits`; the finished and the abandoned leave."""
        import torch

        logprobs = torch.log_softmax(logits.float(), dim=-1)
        best = logprobs.max(dim=-1)  # the greedy tokens and their log probabilities, in one pass
        picked, chosen = best.indices.tolist(), best.values.tolist()
        for row, seq in enumerate(batch):
            if seq.g.do_sample:
                picked[row] = pick(logprobs[row], seq.g, seq.rng, picked[row])
                chosen[row] = float(logprobs[row, picked[row]])
        items: list[tuple[Any, Any]] = []
        for seq, nxt, logprob in zip(batch, picked, chosen, strict=True):
            if seq.cancelled.is_set():
                seq.finish = "cancelled"
                self.stats.cancelled += 1
                items.append((seq.sink, Outcome(seq.text, seq.generated, seq.finish)))
                continue
            seq.ids.append(nxt)
            self.stats.generated += 1
            piece = self._detokenize(seq)
            seq.text += piece
            g = seq.g
            seq.finish = (
                "eos_token"
                if nxt == self.eos
                else "stop_sequence"
                if g.stop and any(seq.text.endswith(s) for s in g.stop)
                else "length"
                if seq.generated >= g.max_new_tokens
                else ""
            )
            if seq.streamed:
                items.append((seq.sink, (Token(nxt, piece, logprob), seq.finish)))
            if seq.finish:
                items.append((seq.sink, Outcome(seq.text, seq.generated, seq.finish)))
        if items:
            self.deliver(items)
        if any(seq.finish for seq in batch):
            self._leave([seq for seq in self._running if not seq.finish])

    def _detokenize(self, seq: Sequence) -> str:
        """The text the newest token adds (TGI's decode_token: the window from `prefix` decoded with
        and without the tokens since `read`; held back while it ends in a partial character)."""
        decode = self.tokenizer.decode
        before: str = decode(seq.ids[seq.prefix : seq.read], skip_special_tokens=True)
        after: str = decode(seq.ids[seq.prefix :], skip_special_tokens=True)
        if len(after) > len(before) and not after.endswith("\ufffd"):
            seq.prefix, seq.read = seq.read, len(seq.ids)
            return after[len(before) :]
        return ""

    # ---- the batch's keys and values

    def _merge(self, group: list[Sequence], cache: Any, mask: Any) -> None:
        """`group` (its cache and mask) joins the running batch, both left padded to one length."""
        import torch
        from transformers import DynamicCache

        if not self._running:
            self._running, self._cache, self._mask = list(group), cache, mask
            return
        width = max(self._mask.shape[1], mask.shape[1])
        layers = []
        for (k1, v1, *_), (k2, v2, *_) in zip(self._cache, cache, strict=True):
            layers.append(
                (
                    torch.cat([_pad(k1, width), _pad(k2, width)], dim=0),
                    torch.cat([_pad(v1, width), _pad(v2, width)], dim=0),
                )
            )
        self._cache = DynamicCache(ddp_cache_data=layers)
        self._mask = torch.cat([_pad(self._mask, width, dim=1), _pad(mask, width, dim=1)], dim=0)
        self._running += group

    def _leave(self, keep: list[Sequence]) -> None:
        """Only `keep` stay in the batch; columns no sequence uses any more are dropped."""
        import torch
        from transformers import DynamicCache

        if not keep:
            self._running, self._cache, self._mask = [], None, None
            return
        rows = torch.tensor([self._running.index(seq) for seq in keep])
        mask = self._mask[rows]
        start = int((mask.sum(dim=0) == 0).cumprod(dim=0).sum())  # leading columns all padding
        self._cache = DynamicCache(
            ddp_cache_data=[(k[rows, :, start:], v[rows, :, start:]) for k, v, *_ in self._cache]
        )
        self._mask, self._running = mask[:, start:], keep

    def _fail(self, group: list[Sequence], e: Exception) -> None:
        """The model failed on `group`'s forward pass: each of them ends with the error."""
        self.deliver([(seq.sink, e) for seq in group])
        if any(seq in self._running for seq in group):
            self._leave([seq for seq in self._running if seq not in group])


def _takes(model: Any, name: str) -> bool:
    import inspect

    forward = getattr(model, "forward", None)
    try:
        return forward is not None and name in inspect.signature(forward).parameters
    except (TypeError, ValueError):
        return False


def _pad(t: Any, width: int, dim: int = 2) -> Any:
    """`t` with zeros before it along `dim` up to `width` (keys and values: [batch, heads, length,
    head size]; a mask: [batch, length])."""
    import torch

    missing = width - t.shape[dim]
    if missing == 0:
        return t
    shape = list(t.shape)
    shape[dim] = missing
    return torch.cat([torch.zeros(shape, dtype=t.dtype), t], dim=dim)


def pick(logprobs: Any, g: Generation, rng: Any, greedy: int) -> int:
    """A sampled token from one row of log probabilities, as the request's parameters ask."""
    import torch

    # In float64, less the best score: the best token's score stays 0 at any temperature the
    # request may give (1e-300 included), so softmax never sees inf - inf.
    scores = logprobs.double()
    scores = (scores - scores.max()) / g.temperature
    if g.top_k:
        kth = torch.topk(scores, min(g.top_k, scores.numel())).values[-1]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    if g.top_p < 1:
        ordered, order = torch.sort(probs, descending=True)
        keep = torch.cumsum(ordered, dim=-1) - ordered < g.top_p
        keep[0] = True  # the most likely token, whatever the top_p (1e-300 keeps it alone)
        probs = torch.zeros_like(probs).scatter(0, order[keep], ordered[keep])
    total = probs.sum()
    if not bool(torch.isfinite(probs).all()) or not float(total) > 0:
        return greedy  # the model's scores were not numbers: nothing to sample from
    return int(torch.multinomial(probs / total, 1, generator=rng))
