"""A checkpoint's model rebuilt from its own configuration, a mismatch refused in one line: what the torch engine
translates with and what every export reads. Reads a checkpoint (mtkit.runs.checkpoint); no search, no engine.
"""

from __future__ import annotations

from pathlib import Path

import torch

from mtkit.errors import UserError
from mtkit.model.packed import pack_linears
from mtkit.model.transformer import ModelConfig, Transformer
from mtkit.runs.checkpoint import load_checkpoint


def load_model(path: Path, device: torch.device, dtype: torch.dtype, packed: bool = True) -> tuple[Transformer, dict]:
    """Rebuild the model from a checkpoint's own configuration; refuse a mismatch in one line.

    `packed`: float32 CPU linears go through oneDNN with packed weights (mtkit.model.packed).
    """
    payload = load_checkpoint(path)
    try:
        model = Transformer(ModelConfig(**payload["configs"]["model"]))
        model.load_state_dict(payload["model"])
    except (KeyError, TypeError, ValueError, UserError, RuntimeError) as exc:
        raise UserError(f"{path}: checkpoint does not match its configuration ({type(exc).__name__})") from None
    model.to(device=device, dtype=dtype).eval()
    if packed:
        pack_linears(model)
    return model, payload
