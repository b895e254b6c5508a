"""A checkpoint read once for any export format: the checkpoint RUN_DIR means, verified, its configs, manifest and
sentencepiece model, its model in float32 on the CPU and its tokenizer, with --out and the model's options checked
before the weights load. Torch, no export format's library.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from mtkit.errors import check
from mtkit.exports.directory import check_export_dir
from mtkit.model.transformer import Transformer
from mtkit.runs.checkpoint import load_checkpoint, resolve_checkpoint
from mtkit.runs.model import load_model
from mtkit.tokenizer import TableTokenizer, Tokenizer, tokenizer_from_bytes


@dataclass
class ExportSource:
    """A checkpoint read for an export: what it carries, its model in float32 on the CPU, and its tokenizer."""

    checkpoint: Path
    configs: dict[str, Any]
    manifest: dict[str, Any]
    step: int | None
    spm_model: bytes
    model: Transformer
    tokenizer: Tokenizer | TableTokenizer


def read_for_export(
    path: str | Path, out: str | Path, check_model: Callable[[dict[str, Any], str], None]
) -> ExportSource:
    """The checkpoint RUN_DIR (or a checkpoint path) means, verified, read once for any export format; `out` checked
    first (check_export_dir) and the model's options by `check_model(options, where)` before the weights load."""
    source = resolve_checkpoint(Path(path))
    check_export_dir(Path(out))
    payload = load_checkpoint(source)
    configs, spm_model, step = payload.get("configs", {}), payload.get("spm_model"), payload.get("step")
    manifest = payload.get("manifest", {})
    del payload  # load_model reads the weights again: one copy in memory at a time
    check_model(configs.get("model", {}), str(source))
    check(spm_model is not None, f"{source}: checkpoint carries no sentencepiece model")
    model, _ = load_model(source, torch.device("cpu"), torch.float32, packed=False)
    tokenizer = tokenizer_from_bytes(spm_model, name=str(source))
    sizes = (len(tokenizer.pieces()), len(tokenizer.target_pieces()))
    check(
        sizes == (model.cfg.vocab_size, model.cfg.target_vocab_size),
        f"{source}: the tokenizer has {sizes[0]} pieces, the model {model.cfg.vocab_size}",
    )
    return ExportSource(source, configs, manifest, step, spm_model, model, tokenizer)
