"""One update by hand: gradients normalized by every target token, however the batches are split."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from mtkit.data import ParallelData, collate
from mtkit.distributed import DistContext
from mtkit.loss import LossModule
from mtkit.model import ModelConfig, Transformer
from mtkit.step import train_step
from mtkit.train import TrainConfig, build_optimizer


def test_accumulated_update_equals_one_batch_of_both(small_data: Path) -> None:
    """update_freq micro-batches give the gradient of one batch holding all their sentences: the loss is
    summed and divided once by all target tokens, not averaged per micro-batch (which would weight the
    tokens of a short batch more)."""
    data = ParallelData.open(small_data, "train", "en", "de")
    first, second = np.arange(0, 3), np.arange(3, 12)  # unequal batches: per-batch means would differ
    ctx = DistContext(rank=0, world_size=1, device=torch.device("cpu"))
    grads = []
    for batches in ([collate(data, first), collate(data, second)], [collate(data, np.concatenate([first, second]))]):
        torch.manual_seed(0)
        model = Transformer(ModelConfig.preset("tiny", vocab_size=1000, dropout=0.0))
        module = LossModule(model, 0.1, pad_id=0)
        result = train_step(module, build_optimizer(model, TrainConfig(), ctx.device), None, batches, ctx, lr=1e-3, attempt=1)
        assert result.tgt_tokens == sum(b.tgt_tokens for b in batches) and not result.skipped
        grads.append({name: p.grad.clone() for name, p in model.named_parameters()})
    for name, grad in grads[0].items():
        torch.testing.assert_close(grad, grads[1][name], rtol=1e-4, atol=1e-6, msg=name)
