"""The floating-point precision a device runs fast: `auto` resolved, one line when an explicit bf16 will be slow, and
CUDA's float32 kernels (TF32, no cuDNN attention) set for training and decoding alike.

bf16 is fast only where the hardware has it: a CUDA GPU from Ampere on, or a CPU with AVX512-BF16 or AMX. Elsewhere
torch still computes bf16, through emulated kernels: on a 2-core AMD EPYC with AVX2 only (2026-11-23) a 512x512
matmul ran at 1.2 GFLOP/s in bf16 against 70 in fp32, and training on the demo workload at 114 against about 5,600
tokens/s. Model and data code never ask; train, translate and serve resolve their precision here once.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

PRECISIONS = ("auto", "fp32", "bf16", "fp16")
# What torch reports when told (ATEN_CPU_CAPABILITY) or built to use no AVX-512 kernels: bf16 then runs emulated
# even on a CPU that has AVX512-BF16, as on a CPU without it.
_NARROW_CAPABILITIES = ("DEFAULT", "NO AVX", "AVX", "AVX2")


def cpu_has_native_bf16() -> bool:
    """AVX512-BF16 or AMX, as torch reports the CPU, and torch's and oneDNN's kernels allowed to use them.

    The CPU flags alone are not enough: ATEN_CPU_CAPABILITY=avx2 and ONEDNN_MAX_CPU_ISA=AVX2 keep torch and oneDNN
    on their AVX2 kernels, and oneDNN then reports no bf16 support.
    """
    flags = torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
    kernels = torch.backends.cpu.get_cpu_capability().upper() not in _NARROW_CAPABILITIES
    return bool(flags and kernels and torch.ops.mkldnn._is_mkldnn_bf16_supported())


def native_bf16(device: torch.device | str) -> bool:
    """Whether bf16 runs on native kernels on `device` (cpu or cuda; any other device: no)."""
    device = torch.device(device)
    if device.type == "cuda":  # Ampere or newer: emulated bf16 on older GPUs does not count
        return torch.cuda.is_bf16_supported(including_emulation=False)
    return device.type == "cpu" and cpu_has_native_bf16()


def resolve_precision(name: str, device: torch.device | str, option: str, warn: Callable[[str], None]) -> str:
    """`auto` -> bf16 where it runs natively, else fp32; any other name as given, after its check.

    An explicit bf16 on a GPU without it is refused (the way out, fp16, is as fast there); on a CPU without it it
    runs, after one line through `warn` with the slowdown measured here: bf16 still gives a CPU-only user what it
    gives elsewhere (the same numbers as a bf16 GPU run, to check one against the other), only slowly.

    Args:
        option: how the user named the setting (`train.precision`, `--dtype`), for the messages.

    Raises:
        ValueError: an unknown name or bf16 on a CUDA GPU without it (train and translate turn it into UserError).
    """
    if name not in PRECISIONS:
        raise ValueError(f"{option} must be one of {', '.join(PRECISIONS)}; got {name!r}")
    device = torch.device(device)
    if name == "auto":
        return "bf16" if native_bf16(device) else "fp32"
    if name == "bf16" and not native_bf16(device):
        if device.type == "cuda":
            raise ValueError(
                f"{option}=bf16: {torch.cuda.get_device_name(device)} has no bf16 support (pre-Ampere "
                f"GPU); use {option}=fp16 or auto"
            )
        warn(
            f"{option}=bf16: this CPU has no native bf16 (AVX512-BF16 or AMX), so bf16 runs emulated; a matmul "
            f"here is {bf16_slowdown():.0f}x slower than in fp32. {option}=auto (or fp32) takes the fast path"
        )
    return name


def bf16_slowdown(size: int = 256, repeats: int = 3) -> float:
    """fp32 over bf16 speed of a size x size CPU matmul, best of `repeats` each (about 0.1 s where bf16 is emulated)."""
    a = torch.randn(size, size)
    return _best_seconds(a.bfloat16(), repeats) / _best_seconds(a, repeats)


def _best_seconds(a: torch.Tensor, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ a
        best = min(best, time.perf_counter() - start)
    return max(best, 1e-9)


def configure_cuda_kernels(device: torch.device | str) -> None:
    """On CUDA, TF32 for float32 matmuls and scaled_dot_product_attention without its cuDNN backend (no-op
    elsewhere, so CPU numbers never change).

    cuDNN attention builds an execution plan for every new shape (reported 0.04-1 s each): every new batch shape
    in training and every key length in decoding (one more each step) would pay it. The flash and
    memory-efficient kernels, which SDPA picks next, take any shape at no set-up cost. TF32 runs float32 matmuls
    on tensor cores (10-bit mantissa inputs, float32 sums), several times faster, as PyTorch advises for
    training; fp32 GPU results then differ from the CPU's in the last bits.
    """
    if torch.device(device).type != "cuda":
        return
    torch.backends.cuda.enable_cudnn_sdp(False)
    torch.set_float32_matmul_precision("high")  # TF32 matmuls
    torch.backends.cudnn.allow_tf32 = True
