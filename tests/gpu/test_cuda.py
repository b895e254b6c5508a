"""The CUDA paths, proven on the first GPU that runs them (`make gpu-check`); every test skips without CUDA.

What each checks on a GPU: a few updates of `tiny` and `base` in fp32, bf16, fp16 and compiled (finite losses,
the step count reached); resume (4 + 4 updates against 8 straight: GPU kernels are not deterministic, so close,
not identical, is the guarantee, and a lost optimizer or RNG state would show far above that); averaging on a
GPU-trained run; DDP over NCCL at world size 1 under torchrun, and `mtkit train` under torchrun; CUDA
translations of 200 test sentences against the CPU's (identical lines counted: strict fp32, TF32, bf16); host
synchronisations per update. Figures go to $GPU_CHECK_RECORD (JSONL) when set, for the gpu-check summary.
MTKIT_GPU_TESTS_DEVICE=cpu runs the tests that need no CUDA on the CPU (to check this file without a GPU).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

from mtkit.recipe import resolve_recipe
from mtkit.runs.checkpoint import load_checkpoint
from mtkit.runs.checkpoint_files import list_checkpoints
from mtkit.training.loop import train
from tests.conftest import ROOT, read_gz_lines

DEVICE = os.environ.get("MTKIT_GPU_TESTS_DEVICE", "cuda")
RECORD_ENV = "GPU_CHECK_RECORD"
pytestmark = pytest.mark.skipif(DEVICE == "cuda" and not torch.cuda.is_available(), reason="no CUDA device")
needs_cuda = pytest.mark.skipif(DEVICE != "cuda", reason="CUDA only")
SYNC_WARNING = "called a synchronizing CUDA operation"


def record(test: str, **figures: object) -> None:
    """Print a test's figures and append them to $GPU_CHECK_RECORD (JSONL) for the gpu-check summary."""
    line = json.dumps({"test": test, "device": gpu_name(), **figures})
    print(line)
    if path := os.environ.get(RECORD_ENV):
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")


def gpu_name() -> str:
    return torch.cuda.get_device_name(0) if DEVICE == "cuda" else "cpu"


def fp32_matmul_mode() -> str:
    """How float32 matmuls run: torch>=2.9's fp32_precision ("ieee"/"tf32"), else the legacy setting. Reading
    the legacy allow_tf32 flag raises once the new API has been used, so it is never read here."""
    return getattr(torch.backends.cuda.matmul, "fp32_precision", None) or torch.get_float32_matmul_precision()


def subprocess_env() -> dict[str, str]:
    """The environment for child processes: this checkout importable even where mtkit is not installed."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def gpu_recipe(arch: str, *overrides: str):
    """A short run on DEVICE: small batches, a log record per update, no time-based saves."""
    base = [
        f"train.device={DEVICE}",
        "train.max_tokens=2048",
        "train.warmup_steps=10",
        "train.log_interval=1",
        "train.save_interval_minutes=0",
        "train.valid_interval_steps=0",
        "train.average_last=1",
    ]
    return resolve_recipe(None, arch, base + list(overrides), vocab_size=1000)


def train_records(run_dir: Path) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if "loss" in r and "tgt_tokens" in r]


def finite_tensors(state: dict) -> bool:
    return all(torch.isfinite(v).all() for v in state.values() if torch.is_tensor(v) and v.is_floating_point())


PRECISIONS = [("fp32", False), ("bf16", False), ("fp16", False), ("bf16", True)]


@pytest.mark.parametrize("arch", ["tiny", "base"])
@pytest.mark.parametrize("precision,compiled", PRECISIONS, ids=["fp32", "bf16", "fp16", "bf16-compiled"])
def test_few_updates(arch: str, precision: str, compiled: bool, small_data: Path, tmp_path: Path) -> None:
    if DEVICE != "cuda" and (precision == "fp16" or compiled):
        pytest.skip("fp16 training needs CUDA; torch.compile on a CPU takes minutes")
    if DEVICE == "cuda":
        torch.cuda.reset_peak_memory_stats()
    run = tmp_path / "run"
    summary = train(
        small_data,
        run,
        gpu_recipe(arch, f"train.precision={precision}", f"train.compile={compiled}", "train.max_steps=4"),
    )
    records = train_records(run)
    assert summary["step"] == 4 and [r["step"] for r in records] == [1, 2, 3, 4]
    assert all(math.isfinite(r["loss"]) for r in records), records
    assert finite_tensors(load_checkpoint(run / "average.pt")["model"])
    memory = round(torch.cuda.max_memory_allocated() / 2**20) if DEVICE == "cuda" else None
    record(
        f"few_updates[{arch}-{precision}{'-compiled' if compiled else ''}]",
        losses=[r["loss"] for r in records],
        tokens_per_s=[r["tokens_per_s"] for r in records],
        peak_allocated_mib=memory,
    )


def test_resume_close_to_straight(small_data: Path, tmp_path: Path) -> None:
    """4 updates, stop, resume to 8 == 8 straight, up to GPU nondeterminism."""
    common = ("train.save_interval_steps=4", "train.precision=fp32")
    train(small_data, tmp_path / "straight", gpu_recipe("tiny", *common, "train.max_steps=8"))
    train(small_data, tmp_path / "split", gpu_recipe("tiny", *common, "train.max_steps=4"))
    train(small_data, tmp_path / "split", gpu_recipe("tiny", *common, "train.max_steps=8"))
    a = load_checkpoint(list_checkpoints(tmp_path / "straight")[-1])
    b = load_checkpoint(list_checkpoints(tmp_path / "split")[-1])
    assert a["step"] == b["step"] == 8 and [r["step"] for r in train_records(tmp_path / "split")] == list(range(1, 9))
    diffs = [(a["model"][k].float() - b["model"][k].float()).abs() for k in a["model"]]
    worst = max(d.max().item() for d in diffs)
    mean = sum(d.sum().item() for d in diffs) / sum(d.numel() for d in diffs)
    identical = all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    record(
        "resume",
        bit_identical=identical,
        max_abs_param_diff=worst,
        mean_abs_param_diff=mean,
        fp32_matmul=fp32_matmul_mode(),
    )
    # Adam moves every weight by about lr (~5e-4 here) per update: a lost moment, step count or dropout stream
    # moves the mean by that much, while reduction-order noise stays orders of magnitude below.
    assert mean < 2e-5, (mean, worst)


def test_average_on_device(small_data: Path, tmp_path: Path) -> None:
    from mtkit.engines.torch_engine import TorchTranslator

    run = tmp_path / "run"
    train(
        small_data, run, gpu_recipe("tiny", "train.max_steps=6", "train.save_interval_steps=2", "train.average_last=3")
    )
    averaged = load_checkpoint(run / "average.pt")["model"]
    states = [load_checkpoint(p)["model"] for p in list_checkpoints(run)[-3:]]
    for key, value in averaged.items():
        mean = torch.stack([s[key].double() for s in states]).mean(0)
        assert torch.allclose(value.double(), mean, atol=1e-6), key
    assert TorchTranslator.load(run, device=DEVICE).translate(["A man is sleeping."])[0]


def torchrun(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1", *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=subprocess_env(), timeout=300)


def test_ddp_over_nccl_world_size_one(small_data: Path) -> None:
    """DDP over NCCL (gloo on the CPU), one rank under torchrun, gives the update the same steps give without DDP."""
    done = torchrun(str(Path(__file__).with_name("ddp_worker.py")), str(small_data), DEVICE)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    record("ddp_torchrun_world_1", **result)
    assert result["backend"] == ("nccl" if DEVICE == "cuda" else "gloo") and result["probe"] == [2.0] * 4
    assert result["max_abs_param_change"] > 1e-4  # the updates happened
    assert result["max_abs_param_diff_vs_no_ddp"] < 1e-5, result


def test_mtkit_train_under_torchrun(small_data: Path, tmp_path: Path) -> None:
    done = torchrun(
        "-m",
        "mtkit",
        "train",
        str(small_data),
        "--save-dir",
        str(tmp_path / "run"),
        "--arch",
        "tiny",
        "--max-steps",
        "3",
        "--set",
        f"train.device={DEVICE}",
        "--set",
        "train.save_interval_minutes=0",
        "--set",
        "train.average_last=1",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert load_checkpoint(list_checkpoints(tmp_path / "run")[-1])["step"] == 3


@needs_cuda
def test_device_auto_picks_cuda() -> None:
    from mtkit.engines.torch_engine import resolve_torch_device

    assert resolve_torch_device("auto") == "cuda"


def translate_on_cuda(run: Path, lines: list[str], dtype: str, matmul: str) -> tuple[list[str], str]:
    """Translations on CUDA with float32 matmuls at `matmul` precision ("highest": IEEE fp32, "high": TF32), and
    the mode in effect when they ended (mtkit may choose TF32 itself)."""
    from mtkit.engines.torch_engine import TorchTranslator

    translator = TorchTranslator.load(run, device="cuda", dtype=dtype)
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(matmul)  # after load: mtkit may choose TF32 itself when it loads
    try:
        return translator.translate(lines), fp32_matmul_mode()
    finally:
        torch.set_float32_matmul_precision(previous)


@needs_cuda
def test_cuda_translations_match_cpu(tiny_run: Path, multi30k: Path) -> None:
    """200 test sentences, beam 4: the CUDA output against the CPU's, line by line."""
    from mtkit.engines.torch_engine import TorchTranslator

    lines = read_gz_lines(multi30k / "test_2016_flickr.en.gz", 200)
    cpu = TorchTranslator.load(tiny_run, device="cpu").translate(lines)
    identical, modes = {}, {}
    for name, dtype, matmul in (("fp32", "fp32", "highest"), ("tf32", "fp32", "high"), ("bf16", "bf16", "highest")):
        gpu, modes[name] = translate_on_cuda(tiny_run, lines, dtype, matmul)
        assert len(gpu) == len(lines), name
        identical[name] = sum(a == b for a, b in zip(cpu, gpu))
    record(
        "translate_cuda_vs_cpu",
        lines=len(lines),
        fp32_matmul_modes=modes,
        **{f"identical_{k}": v for k, v in identical.items()},
    )
    # Strict fp32 differs from the CPU only in summation order (~1e-6), which flips a beam choice only at a near
    # tie; TF32 and bf16 round far more, so only a floor that garbage output would miss.
    assert identical["fp32"] >= 180 and min(identical["tf32"], identical["bf16"]) >= 50, identical


def syncs_during_training(data: Path, run_dir: Path, steps: int) -> tuple[int, list[str]]:
    """Synchronizing CUDA calls of a whole in-process `train` run (bf16, update_freq 4), counted in 'warn' mode."""
    recipe = gpu_recipe(
        "tiny",
        "train.precision=bf16",
        "train.update_freq=4",
        "train.max_tokens=1024",
        f"train.max_steps={steps}",
        "train.log_interval=1000",
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            train(data, run_dir, recipe)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    hits = [w for w in caught if SYNC_WARNING in str(w.message)]
    return len(hits), sorted({f"{Path(w.filename).name}:{w.lineno}" for w in hits})


@needs_cuda
def test_host_syncs_per_update(small_data: Path, tmp_path: Path) -> None:
    """The syncs that 4 more updates add, per update: per-update synchronisation means at most 2, whatever
    update_freq (start-up, the last validation, save and average are in both runs and cancel)."""
    train(
        small_data, tmp_path / "warm", gpu_recipe("tiny", "train.precision=bf16", "train.max_steps=2")
    )  # CUDA context
    short, _ = syncs_during_training(small_data, tmp_path / "short", 4)
    long, where = syncs_during_training(small_data, tmp_path / "long", 8)
    per_update = (long - short) / 4
    record("host_syncs", syncs_4_updates=short, syncs_8_updates=long, per_update=per_update, update_freq=4, at=where)
    assert short > 0  # the counter works: saving alone synchronizes
    assert per_update <= 2, (per_update, where)
