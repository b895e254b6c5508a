"""The Transformer's parts other than attention: dropout, token embedding with positions, feed-forward, the
residual around a sub-layer, and the initialisation of linears and embeddings. mtkit.model.transformer wires them.
Imports torch and numpy only; takes sizes as arguments, never a config (mtkit.model.transformer owns ModelConfig).
"""

# Shape letters: B batch, L length of whichever sequence a layer sees, D d_model, P max_positions.

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mtkit.model.onednn import Linear

# Every LayerNorm of mtkit's models (torch.nn.LayerNorm's default, and Marian's): the exports write it down.
LAYER_NORM_EPSILON = 1e-5


class Dropout(nn.Module):
    """Inverted dropout with a cheap CPU mask: 16-bit words of a small-state generator.

    On CPU, F.dropout's per-element Bernoulli sampling took 10% of a bf16 training step, and even
    torch's Mersenne-Twister int32s cost 6.6 ns each (BENCHMARKS.md). numpy's SFC64 makes 64 bits in
    3.4 ns, seeding included; it is seeded by one draw from torch's generator, so torch's RNG state still
    determines every mask (exact resume). Thresholding 16-bit words keeps p exact to 1/65536.
    Other devices use F.dropout.
    """

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p
        self._threshold = -32768 + round(p * 65536)  # int16 words below this are dropped

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        if x.device.type != "cpu":
            return F.dropout(x, self.p, True)
        seed = int(torch.randint(0, 2**63 - 1, (1,), dtype=torch.int64))
        words = np.random.SFC64(seed).random_raw((x.numel() + 3) // 4)  # 4 int16 words per draw
        keep = torch.from_numpy(words.view(np.int16)[: x.numel()]).view(x.shape) >= self._threshold
        return _ScaleByMask.apply(x, keep, 1.0 / (1.0 - self.p))


class _ScaleByMask(torch.autograd.Function):
    """x * keep * scale with the scaled mask built once in x's dtype and reused by the backward:
    one multiply each way instead of two plus a bool-to-float cast (about 40% less time on CPU)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, keep: Tensor, scale: float) -> Tensor:
        mask = keep.to(x.dtype).mul_(scale)
        ctx.save_for_backward(mask)
        return x * mask

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None]:
        (mask,) = ctx.saved_tensors
        return grad * mask, None, None


def sinusoidal_positions(n_positions: int, d_model: int) -> Tensor:
    """Paper section 3.5: PE[pos, 2i] = sin(pos / 10000^(2i/d_model)), PE[pos, 2i+1] = cos(same)."""
    position = torch.arange(n_positions, dtype=torch.float64)[:, None]  # [P, 1]
    inverse_freq = torch.pow(10000.0, -torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # [D/2]
    angle = position * inverse_freq  # [P, D/2]
    table = torch.zeros(n_positions, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle)[:, : d_model // 2]
    return table.float()


def init_linear(d_in: int, d_out: int, blocks: int = 1) -> Linear:
    """Linear layer with xavier-uniform weights and zero biases (fairseq). A fused projection of `blocks`
    outputs is initialised block by block with gain 1/sqrt(2), as fairseq does its separate q, k, v."""
    linear = Linear(d_in, d_out)
    with torch.no_grad():
        for block in linear.weight.chunk(blocks, dim=0):
            nn.init.xavier_uniform_(block, gain=1.0 if blocks == 1 else 2**-0.5)
        linear.bias.zero_()
    return linear


def init_embedding(weight: Tensor, d_model: int, pad_id: int | None) -> None:
    """N(0, d_model^-0.5) so that the sqrt(d_model)-scaled embedding has unit variance (fairseq)."""
    with torch.no_grad():
        nn.init.normal_(weight, mean=0.0, std=d_model**-0.5)
        if pad_id is not None:
            weight[pad_id].zero_()


class Embedding(nn.Module):
    """sqrt(d_model) * token embedding + position encoding, then dropout (paper sections 3.4, 3.5)."""

    def __init__(self, tokens: nn.Embedding, d_model: int, max_positions: int, learned: bool, dropout: float) -> None:
        """`learned`: a trained position table instead of the paper's sinusoids."""
        super().__init__()
        self.tokens = tokens
        self.scale = math.sqrt(d_model)
        self.max_positions = max_positions
        self.learned = nn.Embedding(max_positions, d_model) if learned else None
        if self.learned is not None:
            init_embedding(self.learned.weight, d_model, None)
        # Not persistent: the table is a pure function of the config and stays out of checkpoints.
        table = None if self.learned is not None else sinusoidal_positions(max_positions, d_model)
        self.register_buffer("sinusoid", table, persistent=False)
        self.dropout = Dropout(dropout)

    def forward(self, tokens: Tensor, start: int = 0) -> Tensor:
        """tokens [B, L] at positions start.. -> [B, L, D]."""
        end = start + tokens.shape[1]
        if end > self.max_positions:
            raise ValueError(f"sequence of {end} tokens exceeds max_positions={self.max_positions}")
        table = self.sinusoid if self.learned is None else self.learned.weight
        return self.dropout(self.tokens(tokens) * self.scale + table[start:end])


class FeedForward(nn.Module):
    """Position-wise FFN(x) = max(0, x W1 + b1) W2 + b2 (paper section 3.3), activation dropout inside."""

    def __init__(self, d_model: int, d_ff: int, activation: str, activation_dropout: float) -> None:
        """`activation`: "relu" (the paper) or "swish" (SiLU)."""
        super().__init__()
        self.inner = init_linear(d_model, d_ff)
        # A module, so that mtkit.model.packed can fold a ReLU into `inner` (it leaves any other activation alone).
        self.activation: nn.Module = nn.ReLU() if activation == "relu" else nn.SiLU()
        self.outer = init_linear(d_ff, d_model)
        self.dropout = Dropout(activation_dropout)

    def forward(self, x: Tensor) -> Tensor:
        """[B, L, D] -> [B, L, D]."""
        return self.outer(self.dropout(self.activation(self.inner(x))))


class Residual(nn.Module):
    """The residual around one sub-layer: post-norm LN(x + drop(f(x))) or pre-norm x + drop(f(LN(x)))."""

    def __init__(self, d_model: int, pre_norm: bool, dropout: float) -> None:
        super().__init__()
        self.pre_norm = pre_norm
        self.norm = nn.LayerNorm(d_model, eps=LAYER_NORM_EPSILON)
        self.dropout = Dropout(dropout)

    def before(self, x: Tensor) -> Tensor:
        """The sub-layer's input."""
        return self.norm(x) if self.pre_norm else x

    def after(self, x: Tensor, y: Tensor) -> Tensor:
        """The stream after adding the sub-layer's output y."""
        x = x + self.dropout(y)
        return x if self.pre_norm else self.norm(x)
