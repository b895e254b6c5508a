"""Training's float32 CPU matrix products through oneDNN instead of MKL's sgemm: the linears (forward and both
gradients) and the loss's vocabulary products.

PyTorch sends a float32 product on CPU to MKL, whose sgemm ran at its AVX2 kernels' speed on an AMD Zen 5 with
AVX-512 (the same with AVX2 forced): about 200 GFLOP/s on 2 cores for the demo model's shapes, where
oneDNN's own kernels reach 380-480 forward (the whole update: 1.50x; with both forced to AVX2, the same speed;
BENCHMARKS.md). bfloat16 products already go to oneDNN. Which operand orientation oneDNN runs fast differs per
product, so each gradient is written in the orientation measured fastest for it.

Training only: a product here is not batch-independent, and inference has mtkit.model.packed. Results differ from
MKL's in the last bits; a run is deterministic either way for one machine, kernel path and thread count, which is
what resume exactness needs. The recipe's `train.cpu_matmul` chooses: "auto" (the default) takes oneDNN where torch
runs AVX-512 kernels and MKL on AVX2 ones, where the whole update measured the same speed on both (6,446 against
6,456 tokens/s) and oneDNN's per-shape primitives cost memory (peak RSS 3.9 against 1.5 GB on the Zen 5's
AVX-512 path). Intel CPUs with AVX-512, where MKL keeps its AVX-512 kernels, take oneDNN too: not measured.
Imports torch only.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

CPU_MATMULS = ("auto", "onednn", "mkl")
_backend = "auto"


@functools.cache
def onednn_available() -> bool:
    """Whether this torch has the oneDNN linear ops (a CPU build with mkldnn)."""
    ops = torch.ops.mkldnn
    return (
        torch.backends.mkldnn.is_available()
        and hasattr(ops, "_reorder_linear_weight")
        and hasattr(ops, "_linear_pointwise")
    )


def set_cpu_matmul(name: str) -> None:
    """Which library training's float32 CPU products use from now on in this process: "onednn", "mkl", or "auto"
    (oneDNN on AVX-512 kernels, MKL on AVX2 ones, where the two measured the same speed and MKL less memory)."""
    global _backend
    if name not in CPU_MATMULS:
        raise ValueError(f"cpu_matmul must be one of {', '.join(CPU_MATMULS)}, not {name!r}")
    _backend = name


def cpu_matmul() -> str:
    """The library in use: "onednn" where chosen (or "auto" on AVX-512 kernels) and available, else "mkl"."""
    if _backend == "mkl" or not onednn_available():
        return "mkl"
    return "onednn" if _backend == "onednn" or _avx512_kernels() else "mkl"


@functools.cache
def _avx512_kernels() -> bool:
    """Whether torch runs its AVX-512 kernels here (not an AVX2-only CPU, nor ATEN_CPU_CAPABILITY=avx2)."""
    return torch.backends.cpu.get_cpu_capability().startswith("AVX512")


def takes(*tensors: Tensor | None) -> bool:
    """Whether a product of these operands goes to oneDNN: float32 on CPU, outside autocast, oneDNN chosen."""
    return (
        cpu_matmul() == "onednn"
        and not torch.is_autocast_enabled("cpu")
        and all(t is None or (t.device.type == "cpu" and t.dtype == torch.float32) for t in tensors)
    )


def forward_product(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """x [N, in] @ weight [out, in]^T (+ bias) -> [N, out]; either operand may be a strided view (the gradients
    below pass transposed ones)."""
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


def input_grad(grad: Tensor, weight: Tensor) -> Tensor:
    """grad [N, out] @ weight [out, in] -> [N, in]."""
    return forward_product(grad, weight.t())


def weight_grad(grad: Tensor, x: Tensor) -> Tensor:
    """grad [N, out]^T @ x [N, in] -> [out, in], contiguous.

    Both operands are read transposed; oneDNN runs that 1.3-2.8x faster when the wider of out and in is its
    output's columns (the demo model's shapes on a Zen 5), so a narrow-out product is computed transposed."""
    if grad.size(1) >= x.size(1):
        return forward_product(x.t(), grad.t()).t().contiguous()
    return forward_product(grad.t(), x.t())


class _Linear(torch.autograd.Function):
    """F.linear with oneDNN products each way; 2-D and higher inputs alike (rows are flattened)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        rows = x.reshape(-1, x.size(-1))
        ctx.save_for_backward(rows, weight)
        ctx.has_bias, ctx.shape = bias is not None, x.shape
        return forward_product(rows, weight, bias).view(*x.shape[:-1], weight.size(0))

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
        rows, weight = ctx.saved_tensors
        grad = grad.reshape(-1, grad.size(-1))
        grad_x = input_grad(grad, weight).view(ctx.shape) if ctx.needs_input_grad[0] else None
        grad_w = weight_grad(grad, rows) if ctx.needs_input_grad[1] else None
        grad_b = grad.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return grad_x, grad_w, grad_b


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """F.linear, through oneDNN where it is training's float32 CPU product (gradients wanted); F.linear otherwise,
    and inside torch.compile, whose graphs choose their own kernels."""
    if torch.compiler.is_compiling():
        return F.linear(x, weight, bias)
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad) and takes(x, weight, bias):
        return _Linear.apply(x, weight, bias)
    return F.linear(x, weight, bias)


class Linear(nn.Linear):
    """nn.Linear whose training products on CPU in float32 go through oneDNN; the same parameters and state_dict."""

    def forward(self, x: Tensor) -> Tensor:
        return linear(x, self.weight, self.bias)
