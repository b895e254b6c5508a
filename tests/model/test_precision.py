"""Precision that fits the hardware: `auto` per device kind, with the capability faked where this machine lacks it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

import mtkit.model.precision as precision
from mtkit.errors import UserError
from mtkit.model.precision import bf16_slowdown, cpu_has_native_bf16, native_bf16, resolve_precision
from tests.conftest import ROOT, run_mtkit_in_process

RECIPE = ROOT / "recipes" / "multi30k-en-de" / "small.toml"
FORCE_AVX2 = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}


def fake_cpu(
    monkeypatch: pytest.MonkeyPatch, bf16_flags: bool, capability: str = "AVX512", onednn: bool = True
) -> None:
    """A CPU as torch would report it: AVX512-BF16 (or not), the kernels torch may use, oneDNN's bf16 support."""
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: bf16_flags)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    monkeypatch.setattr(torch.backends.cpu, "get_cpu_capability", lambda: capability)
    monkeypatch.setattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", lambda: onednn)


def fake_gpu(monkeypatch: pytest.MonkeyPatch, bf16: bool) -> None:
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True: bf16)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA A100" if bf16 else "Tesla V100")


def resolve(name: str, device: str) -> tuple[str, list[str]]:
    said: list[str] = []
    return resolve_precision(name, device, "train.precision", said.append), said


def test_cpu_with_native_bf16_takes_bf16_silently(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cpu(monkeypatch, bf16_flags=True)
    assert cpu_has_native_bf16()
    assert resolve("auto", "cpu") == ("bf16", [])
    assert resolve("bf16", "cpu") == ("bf16", [])
    assert resolve("fp32", "cpu") == ("fp32", [])


def test_cpu_without_native_bf16_takes_fp32_and_an_explicit_bf16_says_how_slow(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cpu(monkeypatch, bf16_flags=False, capability="AVX2", onednn=False)
    monkeypatch.setattr(precision, "bf16_slowdown", lambda: 48.7)
    assert not cpu_has_native_bf16()
    assert resolve("auto", "cpu") == ("fp32", [])
    chosen, said = resolve("bf16", "cpu")
    assert chosen == "bf16" and len(said) == 1 and "\n" not in said[0]
    assert said[0].startswith("train.precision=bf16: this CPU has no native bf16") and "49x slower" in said[0]
    assert "train.precision=auto" in said[0]


@pytest.mark.parametrize("capability, onednn", [("AVX2", True), ("AVX512", False), ("DEFAULT", True)])
def test_bf16_cpu_held_to_narrower_kernels_counts_as_without(
    monkeypatch: pytest.MonkeyPatch,
    capability: str,
    onednn: bool,
) -> None:
    """ATEN_CPU_CAPABILITY=avx2 or ONEDNN_MAX_CPU_ISA=AVX2 on an AVX512-BF16 CPU: bf16 runs emulated there too."""
    fake_cpu(monkeypatch, bf16_flags=True, capability=capability, onednn=onednn)
    assert resolve("auto", "cpu") == ("fp32", [])


def test_cuda_with_and_without_bf16(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_gpu(monkeypatch, bf16=True)
    assert native_bf16("cuda") and resolve("auto", "cuda") == ("bf16", [])
    fake_gpu(monkeypatch, bf16=False)
    assert resolve("auto", "cuda") == ("fp32", [])
    assert resolve("fp16", "cuda") == ("fp16", [])
    with pytest.raises(ValueError, match=r"^train.precision=bf16: Tesla V100 has no bf16 support .*fp16") as raised:
        resolve("bf16", "cuda")
    assert "\n" not in str(raised.value)


def test_unknown_precision_is_refused() -> None:
    with pytest.raises(ValueError, match="train.precision must be one of auto, fp32, bf16, fp16"):
        resolve("fp8", "cpu")


def test_train_turns_a_refusal_into_a_user_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from mtkit.recipe import resolve_recipe
    from mtkit.training.loop import resolve_train_precision

    fake_gpu(monkeypatch, bf16=False)
    recipe = resolve_recipe(None, "tiny", ["train.precision='bf16'"])
    with pytest.raises(UserError, match=r"^train.precision=bf16: Tesla V100"):
        resolve_train_precision(recipe, torch.device("cuda", 0))
    auto = resolve_recipe(None, "tiny", ["train.precision='auto'"])
    assert resolve_train_precision(auto, torch.device("cuda", 0)).train.precision == "fp32"


def test_translate_dtype_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    from mtkit.engines.torch_engine import resolve_dtype

    fake_cpu(monkeypatch, bf16_flags=True)
    assert resolve_dtype("auto", "cpu") == "bf16"
    fake_cpu(monkeypatch, bf16_flags=False, capability="AVX2", onednn=False)
    assert resolve_dtype("auto", "cpu") == "fp32"
    with pytest.raises(UserError, match=r"^--dtype must be one of auto, fp32, bf16, fp16$"):
        resolve_dtype("half", "cpu")
    with pytest.raises(UserError, match=r"^--dtype fp16 needs --device cuda"):
        resolve_dtype("fp16", "cpu")


def test_slowdown_is_measured() -> None:
    assert bf16_slowdown(size=32, repeats=1) > 0


def dry_run_precision(env: dict[str, str]) -> str:
    """The precision `mtkit train --dry-run --json` names: in this process, or under `env` in a process of its own
    (torch reads the kernel variables once, at its import)."""
    args = ["train", "unused-data", "--save-dir", "unused-run", "--config", str(RECIPE), "--dry-run", "--json"]
    if env:
        run = subprocess.run(
            [sys.executable, "-m", "mtkit", *args], capture_output=True, text=True, env={**os.environ, **env}
        )
    else:
        run = run_mtkit_in_process(*args)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)["train"]["precision"]


def test_dry_run_shows_what_auto_resolved_to() -> None:
    """The demo recipe says auto; --dry-run --json names the precision this machine will train in."""
    assert 'precision = "auto"' in RECIPE.read_text(encoding="utf-8")
    assert dry_run_precision({}) == ("bf16" if cpu_has_native_bf16() else "fp32")
    assert dry_run_precision(FORCE_AVX2) == "fp32"


@pytest.mark.exactness
def test_forcing_avx2_takes_effect() -> None:
    """The variables `make test` sets for its second pass reach torch's and oneDNN's kernels (MKL reads its own
    at start-up and says nothing): ATen reports AVX2, oneDNN runs its AVX2 matmul, bf16 counts as emulated."""
    script = (
        "import torch; from mtkit.model.packed import pack_linears; "
        "from mtkit.model.precision import cpu_has_native_bf16\n"
        "m = torch.nn.Sequential(torch.nn.Linear(64, 64)); assert pack_linears(m) == 1; m(torch.randn(3, 64))\n"
        "print('capability', torch.backends.cpu.get_cpu_capability(), 'native_bf16', cpu_has_native_bf16())"
    )
    run = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**os.environ, **FORCE_AVX2, "ONEDNN_VERBOSE": "1"},
    )
    assert run.returncode == 0, run.stderr
    assert "capability AVX2 native_bf16 False" in run.stdout
    assert "isa:Intel AVX2" in run.stdout and "avx512" not in run.stdout.lower()
    matmuls = [line for line in run.stdout.splitlines() if ",exec,cpu,inner_product," in line]
    assert matmuls and all(":avx2," in line for line in matmuls), matmuls
