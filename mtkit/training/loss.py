"""The training criterion: label-smoothed cross-entropy (fused, cache-chunked) and the model+loss module.

torch only; train.py wraps LossModule in DDP and compiles its model part (compile_model).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mtkit.model import onednn

CE_CHUNK_ROWS = 256  # rows of [N, V] in the softmax passes: 256 x 8000 float32 = 8 MB stays in cache
PROJECT_CHUNK_ROWS = 1024  # rows per output-projection GEMM: 1.5-1.7x faster than one [N, D] x [D, V] on CPU


class _ProjectedSmoothedCrossEntropy(torch.autograd.Function):
    """Summed label-smoothed cross-entropy of logits = hidden @ weight^T (+ bias), in row chunks.

    With q the smoothed target distribution, loss = sum_n [lse_n - sum_v q_v z_nv] and its gradient
    is softmax(z) - q. The vocabulary is the widest layer, so its passes are arranged for the cache:
    the projection is computed 1,024 rows at a time (its output stays in cache, where one big GEMM
    writing [N, V] ran at ~60% of the matmul peak), the softmax passes 256 rows at a time, and the
    backward writes the gradient of the logits chunk by chunk into one buffer before two full GEMMs.
    """

    @staticmethod
    def forward(
        ctx: Any, hidden: Tensor, weight: Tensor, bias: Tensor | None, target: Tensor, epsilon: float
    ) -> tuple[Tensor, Tensor]:
        vocab = weight.size(0)
        eps_i = epsilon / (vocab - 1) if epsilon > 0 else 0.0
        loss = torch.zeros((), dtype=torch.float64, device=hidden.device)
        nll_total = torch.zeros((), dtype=torch.float64, device=hidden.device)
        logits = hidden.new_empty(hidden.size(0), vocab)  # [N, V]
        dnn = onednn.takes(hidden, weight, bias)
        # Measured on CPU: MKL's float32 GEMMs want the [D, V] operand contiguous (1.3x), bf16 ones the
        # transposed view of [V, D] (1.07x).
        weight_t = weight.t().contiguous() if weight.dtype == torch.float32 and not dnn else weight.t()  # [D, V]
        for start in range(0, hidden.size(0), PROJECT_CHUNK_ROWS):
            end = start + PROJECT_CHUNK_ROWS
            if dnn:  # oneDNN writes a new tensor: copied while it is still in cache
                logits[start:end] = onednn.forward_product(hidden[start:end], weight, bias)
            else:
                torch.mm(hidden[start:end], weight_t, out=logits[start:end])
                if bias is not None:
                    logits[start:end] += bias
            for row in range(start, min(end, hidden.size(0)), CE_CHUNK_ROWS):
                stop = min(row + CE_CHUNK_ROWS, end)
                # log_softmax converts to float32 inside its kernel: no separate copy of the chunk
                lprobs = torch.log_softmax(logits[row:stop], dim=-1, dtype=torch.float32)  # [n, V]
                nll = -lprobs.gather(-1, target[row:stop].unsqueeze(-1)).squeeze(-1)  # [n]
                nll_total += nll.sum()
                if epsilon > 0:
                    loss += (1.0 - epsilon - eps_i) * nll.sum() - eps_i * lprobs.sum()
                else:
                    loss += nll.sum()
        ctx.save_for_backward(hidden, weight, logits, target)
        ctx.epsilon, ctx.eps_i, ctx.has_bias = epsilon, eps_i, bias is not None
        nll_out = nll_total.float()
        ctx.mark_non_differentiable(nll_out)  # logged, never differentiated
        return loss.float(), nll_out

    @staticmethod
    def backward(ctx: Any, grad_loss: Tensor, grad_nll: Tensor) -> tuple[Tensor, Tensor, Tensor | None, None, None]:
        hidden, weight, logits, target = ctx.saved_tensors
        on_target = (1.0 - ctx.epsilon - ctx.eps_i) * grad_loss
        grad = torch.empty_like(logits)  # [N, V], written chunk by chunk: no concatenation pass
        for start in range(0, logits.size(0), CE_CHUNK_ROWS):
            t = target[start : start + CE_CHUNK_ROWS]
            g = grad[start : start + CE_CHUNK_ROWS]  # [n, V]
            # softmax in the logits' dtype (float32 accumulation inside the kernel): the gradient is
            # rounded to that dtype once, as autograd's own cast back would do
            torch.ops.aten._softmax.out(logits[start : start + CE_CHUNK_ROWS], -1, False, out=g)
            g.mul_(grad_loss)
            if ctx.eps_i:
                g.sub_(ctx.eps_i * grad_loss)
            g[torch.arange(t.numel(), device=t.device), t] -= on_target.to(g.dtype)
        if onednn.takes(grad, weight, hidden):
            grad_hidden, grad_weight = onednn.input_grad(grad, weight), onednn.weight_grad(grad, hidden)
        else:
            grad_hidden, grad_weight = grad @ weight, grad.t() @ hidden
        return grad_hidden, grad_weight, grad.sum(0) if ctx.has_bias else None, None, None


def label_smoothed_loss(
    hidden: Tensor, weight: Tensor, target: Tensor, epsilon: float, bias: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """Summed label-smoothed cross-entropy and summed NLL of logits = hidden [N, D] @ weight [V, D]^T (+ bias [V]).

    As fairseq: the smoothing mass epsilon is spread over the V-1 other classes,
    loss = (1 - eps - eps/(V-1)) * nll + eps/(V-1) * sum_v(-log p_v). The projection runs in the
    autocast dtype when autocast is on (as nn.Linear would); the softmax sums in float32.
    """
    device = hidden.device.type
    if torch.is_autocast_enabled(device):
        dtype = torch.get_autocast_dtype(device)
        hidden, weight = hidden.to(dtype), weight.to(dtype)
        bias = bias.to(dtype) if bias is not None else None
    with torch.autocast(device, enabled=False):
        return _ProjectedSmoothedCrossEntropy.apply(hidden, weight, bias, target, epsilon)


def dense_label_smoothed_loss(
    hidden: Tensor, weight: Tensor, target: Tensor, epsilon: float, pad_id: int, bias: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """The same sums as label_smoothed_loss over every row of hidden [N, D], pad targets weighted 0.

    For GPUs: a fixed number of large kernels whatever N (projection, one log_softmax, nll_loss with
    ignore_index, one masked row sum) and no boolean index, whose data-dependent shape would make the host
    wait for the device and give torch.compile and the allocator a new shape every batch. The pad rows cost
    their share of the projection; the CPU path drops them instead and keeps its chunks in cache.
    """
    vocab = weight.size(0)
    eps_i = epsilon / (vocab - 1) if epsilon > 0 else 0.0
    lprobs = torch.log_softmax(F.linear(hidden, weight, bias), dim=-1, dtype=torch.float32)  # [N, V]
    nll = F.nll_loss(lprobs, target, ignore_index=pad_id, reduction="sum")
    if epsilon == 0:
        return nll, nll.detach()
    smooth = -(lprobs.sum(-1) * (target != pad_id)).sum()  # sum over real rows of sum_v -log p_v
    return (1.0 - epsilon - eps_i) * nll + eps_i * smooth, nll.detach()


class LossModule(nn.Module):
    """Model + criterion in one forward, so DDP and torch.compile see a single module.

    On CPU only non-pad target positions reach the vocabulary projection (the cache-chunked path, which
    saves the output-layer FLOPs of padding); on CUDA the dense path keeps every shape static.
    """

    def __init__(self, model: nn.Module, label_smoothing: float, pad_id: int) -> None:
        super().__init__()
        self.model = model
        self.label_smoothing = label_smoothing
        self.pad_id = pad_id
        self.hidden = self._hidden

    def compile_model(self, **options: Any) -> None:
        """torch.compile the encoder-decoder only. The loss stays eager: on CPU its boolean index has a
        data-dependent shape (a graph break and a recompile per pad count), and it is a few large kernels anyway.
        Shapes may vary (torch.compile marks them dynamic after the first change; rounded lengths keep them few)."""
        self.hidden = torch.compile(self._hidden, **options)

    def _hidden(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """src [B, S], tgt_in [B, T] -> decoder output [B, T, D] (final-normed, not projected)."""
        memory, src_pad = self.model.encode(src)
        return self.model.decode(tgt_in, memory, src_pad)

    def forward(self, src: Tensor, tgt_in: Tensor, tgt_out: Tensor) -> tuple[Tensor, Tensor]:
        hidden = self.hidden(src, tgt_in)  # [B, T, D]
        weight, bias = self.model.output.weight, self.model.output.bias  # bias: None unless cfg.output_bias
        if hidden.device.type == "cuda":
            return dense_label_smoothed_loss(
                hidden.flatten(0, 1), weight, tgt_out.flatten(), self.label_smoothing, self.pad_id, bias
            )
        keep = tgt_out != self.pad_id  # [B, T]
        return label_smoothed_loss(hidden[keep], weight, tgt_out[keep], self.label_smoothing, bias)
