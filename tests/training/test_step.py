"""One update by hand: gradients normalized by every target token, however the batches are split."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from mtkit.corpus.binarized import ParallelData, collate
from mtkit.model.transformer import ModelConfig, Transformer
from mtkit.training.config import TrainConfig
from mtkit.training.distributed import DistContext
from mtkit.training.loss import LossModule
from mtkit.training.step import build_optimizer, train_step
from tests.conftest import ROOT


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
        result = train_step(
            module, build_optimizer(model, TrainConfig(), ctx.device), None, batches, ctx, lr=1e-3, attempt=1
        )
        assert result.tgt_tokens == sum(b.tgt_tokens for b in batches) and not result.skipped
        grads.append({name: p.grad.clone() for name, p in model.named_parameters()})
    for name, grad in grads[0].items():
        torch.testing.assert_close(grad, grads[1][name], rtol=1e-4, atol=1e-6, msg=name)


def ddp_gradients_equal_plain(data_dir: str) -> None:
    """Run in a child process (see the test below); raises if a DDP-wrapped module's gradients differ."""
    import torch.distributed as dist

    from mtkit.training.distributed import wrap_ddp

    data = ParallelData.open(Path(data_dir), "train", "en", "de")
    batch = collate(data, np.arange(16))
    ctx = DistContext(rank=0, world_size=1, device=torch.device("cpu"))
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        grads = {}
        for kind in ("plain", "ddp"):
            torch.manual_seed(0)
            model = Transformer(ModelConfig.preset("tiny", vocab_size=1000, dropout=0.0))
            module = LossModule(model, 0.1, pad_id=0)
            if kind == "ddp":
                module = wrap_ddp(module, ctx)
                assert module.gradient_as_bucket_view
                assert not getattr(module, "forward_sync_buffers", module.broadcast_buffers)
            loss, _ = module(batch.src, batch.tgt_in, batch.tgt_out)
            loss.backward()
            grads[kind] = torch.cat([p.grad.flatten() for p in model.parameters()])
        with pytest.raises(ValueError, match="needs CUDA"):
            wrap_ddp(LossModule(model, 0.1, pad_id=0), ctx, bf16_compress=True)
    finally:
        dist.destroy_process_group()
    assert torch.equal(grads["ddp"], grads["plain"])


def test_ddp_wrapping_without_buffer_broadcasts(small_data: Path) -> None:
    """wrap_ddp in a one-process gloo group: no per-forward buffer sync, gradients as bucket views that equal the
    plain module's; bf16 compression is refused off CUDA (torch's hook needs NCCL; tests/gpu covers it).
    In a child process with a deadline: a process group is process-wide state, and a gloo set-up that waits on
    the network must fail this test, not hang the suite."""
    import subprocess
    import sys

    code = (
        "from tests.training.test_step import ddp_gradients_equal_plain; "
        f"ddp_gradients_equal_plain({str(small_data)!r})"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
