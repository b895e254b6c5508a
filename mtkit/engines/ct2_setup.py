"""CTranslate2 set up on a device, for mtkit.engines.ct2: the device (auto, cpu, cuda), the compute type for --dtype,
the threads per batch, and the model opened from its cached export (exported again once where CTranslate2 cannot
read the cache). ctranslate2 is handed in, imported lazily by the engine.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mtkit.engines.ct2_cache import Exporter, model_directory
from mtkit.errors import check

COMPUTE_TYPES = ("float32", "int8", "int8_float32", "int8_float16", "int8_bfloat16", "float16", "bfloat16")
TORCH_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}  # one --dtype flag for both engines


def resolve_ct2_device(ctranslate2: Any, name: str) -> str:
    """`auto` -> cuda when CTranslate2 sees a CUDA device, else cpu; cpu and cuda as given."""
    check(name in ("auto", "cpu", "cuda"), f"--device {name}: --engine ctranslate2 takes auto, cpu or cuda")
    gpus = ctranslate2.get_cuda_device_count()
    check(name != "cuda" or gpus > 0, "--device cuda: CTranslate2 sees no CUDA device")
    return ("cuda" if gpus > 0 else "cpu") if name == "auto" else name


def resolve_compute_type(ctranslate2: Any, dtype: str, device: str) -> str:
    """--dtype as a CTranslate2 compute type (fp32 -> float32, ...), refused where the engine or device lacks it.

    `auto`: float32 on CPU (int8 changes output), bfloat16 or else float16 on a GPU that has it.
    """
    supported = set(ctranslate2.get_supported_compute_types(device))
    name = TORCH_DTYPES.get(dtype, dtype)
    if name == "auto":
        name = next((t for t in ("bfloat16", "float16") if t in supported and device == "cuda"), "float32")
    check(
        name in COMPUTE_TYPES,
        f"--dtype {dtype}: --engine ctranslate2 takes {', '.join(COMPUTE_TYPES)} (or fp32, bf16, fp16)",
    )
    check(name in supported, f"--dtype {dtype}: CTranslate2 on {device} supports {', '.join(sorted(supported))}")
    return name


def default_threads(workers: int) -> int:
    """Threads per batch: OMP_NUM_THREADS (torch's setting too) or the usable cores, shared by the workers."""
    cores = int(os.environ.get("OMP_NUM_THREADS") or len(os.sched_getaffinity(0)))
    return max(1, cores // workers)


def open_model(
    ctranslate2: Any,
    path: Any,
    exporter: Exporter | None,
    directory: Path,
    device: str,
    compute_type: str,
    workers: int,
    threads: int,
) -> Any:
    """ctranslate2.Translator over `directory`; a cache CTranslate2 cannot read is exported again once."""

    def open_at(where: Path) -> Any:
        return ctranslate2.Translator(
            str(where), device=device, compute_type=compute_type, inter_threads=workers, intra_threads=threads
        )

    try:
        return open_at(directory)
    except (RuntimeError, ValueError) as exc:
        check(directory != Path(path), f"{directory}: CTranslate2 cannot load this model ({exc})")
        return open_at(model_directory(path, exporter, rebuild=True))
