"""The weights `sagestack local serve` gives an LLM endpoint when the project has none: a byte-level
BPE tokenizer trained on local/llm/corpus.py's text and a small GPT-2-style causal model trained on
the same text for a few seconds on CPU — nothing is downloaded from a model hub. They are saved as
the Hugging Face files an LLM container loads from /opt/ml/model (config.json, model.safetensors,
generation_config.json, tokenizer.json, tokenizer_config.json with a chat template), in the local
S3 folder the endpoint's `weights.s3` names, so a second run loads them. Seeded: the same files
every time."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagestack.local.llm.corpus import corpus

EOS = "<|endoftext|>"
ROLES = ("system", "user", "assistant")
# Messages as the OpenAI-style chat route renders them into a prompt (the tokenizer's template).
CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
MARKER = "config.json"


@dataclass(frozen=True)
class WeightsRecipe:
    """How the local weights are made (a larger model reads better and trains longer)."""

    vocab_size: int = 512
    positions: int = 512
    width: int = 64
    layers: int = 2
    heads: int = 2
    steps: int = 300
    window: int = 48
    batch: int = 16
    seed: int = 0


def has_weights(folder: Path) -> bool:
    return (folder / MARKER).is_file() and (folder / "tokenizer.json").is_file()


def build_weights(
    folder: Path,
    recipe: WeightsRecipe | None = None,
    *,
    on_progress: Callable[[int, int, float], None] = lambda step, total, loss: None,
) -> Path:
    """Train the tokenizer and the model and save both in `folder` (written to a temporary folder
    first, then moved into place: a stopped build leaves no half model behind)."""
    import shutil
    import tempfile

    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    _quiet()

    r = recipe or WeightsRecipe()
    text = corpus()
    specials = [EOS, *(f"<|{role}|>" for role in ROLES)]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(
        text,
        trainers.BpeTrainer(
            vocab_size=r.vocab_size,
            special_tokens=specials,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token=EOS, bos_token=EOS, pad_token=EOS, model_max_length=r.positions
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    eos = tokenizer.convert_tokens_to_ids(EOS)
    torch.manual_seed(r.seed)
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=r.positions,
        n_embd=r.width,
        n_layer=r.layers,
        n_head=r.heads,
        bos_token_id=eos,
        eos_token_id=eos,
        pad_token_id=eos,
    )
    model = GPT2LMHeadModel(config)
    ids = torch.tensor([t for p in text for t in [*tokenizer.encode(p), eos]], dtype=torch.long)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    generator = torch.Generator().manual_seed(r.seed)
    model.train()
    for step in range(1, r.steps + 1):
        starts = torch.randint(0, len(ids) - r.window - 1, (r.batch,), generator=generator)
        batch = torch.stack([ids[s : s + r.window] for s in starts.tolist()])
        loss = model(input_ids=batch, labels=batch).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        on_progress(step, r.steps, loss.item())
    model.eval()
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".weights-", dir=folder.parent))
    try:
        model.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def load_weights(folder: Path) -> tuple[Any, Any]:
    """(model, tokenizer) from the files in `folder` (offline: nothing is fetched from a hub)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _quiet()

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder)
    model.eval()
    return model, tokenizer


def _quiet() -> None:
    """transformers' progress bars and advice would interleave with sagestack's own output."""
    from transformers.utils import logging

    logging.set_verbosity_error()
    logging.disable_progress_bar()
