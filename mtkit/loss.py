"""The training criterion: label-smoothed cross-entropy (fused, cache-chunked) and the model+loss module.

torch only; train.py wraps LossModule in DDP / torch.compile.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn


CE_CHUNK_ROWS = 256  # rows of [N, V] handled at once: 256 x 8000 float32 = 8 MB stays in cache


class _SmoothedCrossEntropy(torch.autograd.Function):
    """Summed label-smoothed cross-entropy, computed in cache-sized row chunks.

    With q the smoothed target distribution, loss = sum_n [lse_n - sum_v q_v z_nv] and its gradient
    is softmax(z) - q. Working on 256 rows at a time keeps the float32 copy of the logits in cache,
    instead of several full passes over a [N, V] tensor in main memory (the vocabulary is the widest
    layer: log_softmax + gather and their backward took 13% of a CPU training step).
    """

    @staticmethod
    def forward(ctx: Any, logits: Tensor, target: Tensor, epsilon: float) -> tuple[Tensor, Tensor]:
        vocab = logits.size(-1)
        eps_i = epsilon / (vocab - 1) if epsilon > 0 else 0.0
        loss = torch.zeros((), dtype=torch.float64, device=logits.device)
        nll_total = torch.zeros((), dtype=torch.float64, device=logits.device)
        for start in range(0, logits.size(0), CE_CHUNK_ROWS):
            # log_softmax converts to float32 inside its kernel: no separate copy of the chunk
            lprobs = torch.log_softmax(logits[start : start + CE_CHUNK_ROWS], dim=-1, dtype=torch.float32)  # [n, V]
            t = target[start : start + CE_CHUNK_ROWS]
            nll = -lprobs.gather(-1, t.unsqueeze(-1)).squeeze(-1)  # [n]
            nll_total += nll.sum()
            if epsilon > 0:
                loss += (1.0 - epsilon - eps_i) * nll.sum() - eps_i * lprobs.sum()
            else:
                loss += nll.sum()
        ctx.save_for_backward(logits, target)
        ctx.epsilon, ctx.eps_i = epsilon, eps_i
        nll_out = nll_total.float()
        ctx.mark_non_differentiable(nll_out)  # logged, never differentiated
        return loss.float(), nll_out

    @staticmethod
    def backward(ctx: Any, grad_loss: Tensor, grad_nll: Tensor) -> tuple[Tensor, None, None]:
        logits, target = ctx.saved_tensors
        on_target = (1.0 - ctx.epsilon - ctx.eps_i) * grad_loss
        chunks = []
        for start in range(0, logits.size(0), CE_CHUNK_ROWS):
            t = target[start : start + CE_CHUNK_ROWS]
            # softmax in the logits' dtype (float32 accumulation inside the kernel): the gradient is
            # rounded to that dtype once, as autograd's own cast back would do
            g = torch.softmax(logits[start : start + CE_CHUNK_ROWS], dim=-1).mul_(grad_loss)  # [n, V]
            if ctx.eps_i:
                g.sub_(ctx.eps_i * grad_loss)
            g[torch.arange(t.numel(), device=t.device), t] -= on_target.to(g.dtype)
            chunks.append(g)
        grad = torch.cat(chunks) if len(chunks) > 1 else chunks[0]
        return grad, None, None


def label_smoothed_loss(logits: Tensor, target: Tensor, epsilon: float) -> tuple[Tensor, Tensor]:
    """Summed label-smoothed cross-entropy and summed NLL over the given (non-pad) positions.

    As fairseq: the smoothing mass epsilon is spread over the V-1 other classes,
    loss = (1 - eps - eps/(V-1)) * nll + eps/(V-1) * sum_v(-log p_v). Computed in float32.
    """
    return _SmoothedCrossEntropy.apply(logits, target, epsilon)


class LossModule(nn.Module):
    """Model + criterion in one forward, so DDP and torch.compile see a single module.

    Only non-pad target positions reach the vocabulary projection, which saves the output-layer
    FLOPs that padding would cost.
    """

    def __init__(self, model: nn.Module, label_smoothing: float, pad_id: int) -> None:
        super().__init__()
        self.model = model
        self.label_smoothing = label_smoothing
        self.pad_id = pad_id

    def forward(self, src: Tensor, tgt_in: Tensor, tgt_out: Tensor) -> tuple[Tensor, Tensor]:
        memory, src_pad = self.model.encode(src)
        hidden = self.model.decode(tgt_in, memory, src_pad)  # [B, T, D]
        keep = tgt_out != self.pad_id  # [B, T]
        logits = self.model.project(hidden[keep])  # [N, V]
        return label_smoothed_loss(logits, tgt_out[keep], self.label_smoothing)
