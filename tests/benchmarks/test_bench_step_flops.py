"""The step_flops benchmark's own logic, without training: the CPU's fp32 peak from given flags, clock and cores,
the programs and their worker commands, and a profile's events grouped into matmul, attention, softmax and the rest."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import ROOT

BENCHMARKS = ROOT / "benchmarks"


def cpuinfo(vendor: str, family: int, model: int, flags: str, mhz: float, cores: int, siblings: int = 0) -> str:
    """/proc/cpuinfo of `siblings or cores` processors on one socket, `cores` physical cores."""
    blocks = []
    for cpu in range(siblings or cores):
        blocks.append(
            f"processor\t: {cpu}\nvendor_id\t: {vendor}\ncpu family\t: {family}\nmodel\t\t: {model}\n"
            f"model name\t: test CPU\ncpu MHz\t\t: {mhz}\nphysical id\t: 0\ncore id\t\t: {cpu % cores}\n"
            f"flags\t\t: {flags}\n"
        )
    return "\n".join(blocks)


AVX2 = "fpu sse sse2 avx fma avx2"
AVX512 = AVX2 + " avx512f avx512_bf16"


@pytest.fixture
def scenario(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    # benchmarks/run.py puts benchmarks/ first on the path: the scenarios import harness as top level
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("scenarios.step_flops")


@pytest.fixture
def work(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("step_work")


def test_the_issues_zen3_peak_is_cores_times_clock_times_32(scenario: ModuleType) -> None:
    peak = scenario.theoretical_peak("AVX2", 2, cpuinfo("AuthenticAMD", 25, 1, AVX2, 2450.0, 2), "")
    assert peak["gflops"] == pytest.approx(2 * 2.45 * 32)  # 156.8: the figure the issue quotes
    assert (peak["cores"], peak["ghz"], peak["flops_per_cycle_per_core"]) == (2, 2.45, 32)
    assert peak["clock_source"] == "/proc/cpuinfo cpu MHz"


@pytest.mark.parametrize(
    ("capability", "vendor", "family", "model", "flags", "per_cycle"),
    [
        ("AVX512", "AuthenticAMD", 25, 17, AVX512, 32),  # Zen 4: 512-bit FMAs in two passes
        ("AVX512", "AuthenticAMD", 26, 2, AVX512, 64),  # Zen 5: full-width FMA pipes
        ("AVX2", "AuthenticAMD", 26, 2, AVX512, 32),  # the same Zen 5 forced to AVX2 kernels
        ("AVX512", "GenuineIntel", 6, 143, AVX512, 64),
        ("AVX2", "GenuineIntel", 6, 143, AVX512, 32),
        ("AVX2", "AuthenticAMD", 23, 1, AVX2, 16),  # Zen 1: 128-bit FMA pipes
        ("AVX2", "AuthenticAMD", 23, 49, AVX2, 32),  # Zen 2
        ("DEFAULT", "GenuineIntel", 6, 85, AVX2, 8),
    ],
)
def test_flops_per_cycle_follow_the_kernels_torch_runs(
    scenario: ModuleType, capability: str, vendor: str, family: int, model: int, flags: str, per_cycle: int
) -> None:
    found, why = scenario.fp32_flops_per_cycle(capability, set(flags.split()), vendor, family, model)
    assert found == per_cycle and why


def test_smt_siblings_share_a_core_and_threads_bound_the_cores(scenario: ModuleType) -> None:
    smt = cpuinfo("GenuineIntel", 6, 85, AVX2, 3000.0, cores=1, siblings=2)
    assert scenario.physical_cores(smt) == 1
    assert scenario.theoretical_peak("AVX2", 2, smt, "")["gflops"] == pytest.approx(1 * 3.0 * 32)
    four = cpuinfo("GenuineIntel", 6, 85, AVX2, 3000.0, cores=4)
    assert scenario.theoretical_peak("AVX2", 1, four, "")["cores"] == 1


def test_the_clock_falls_back_to_lscpu(scenario: ModuleType) -> None:
    assert scenario.clock_ghz("cpu MHz\t\t: 2000.000\ncpu MHz\t\t: 2596.1\n", "") == (
        2.596,
        "/proc/cpuinfo cpu MHz",
    )
    assert scenario.clock_ghz("", "CPU max MHz:   3500.0000\nCPU MHz: 1200\n") == (3.5, "lscpu CPU max MHz")
    assert scenario.clock_ghz("", "") == (0.0, "unknown")


def test_programs_measure_both_paths_and_the_levers_at_the_recipes_precision(scenario: ModuleType) -> None:
    native = scenario.programs(native_bf16=True, native_avx2=False)
    assert list(native) == [
        "native, fp32",
        "native, bf16",
        "AVX2, fp32",
        "native, bf16, fused Adam",
        "native, bf16, 1 thread",
        "native, bf16, compiled",
        "AVX2, fp32, fused Adam",
        "AVX2, fp32, compiled",
    ]
    emulated = scenario.programs(native_bf16=False, native_avx2=True)
    assert "native, bf16" not in emulated and "native, fp32, compiled" in emulated
    assert "AVX2, fp32, fused Adam" not in emulated  # on an AVX2-only CPU the native levers are those
    compiled = scenario.worker_command(Path("data"), native["native, bf16, compiled"], "small")
    assert compiled[-1] == "--compile" and compiled[compiled.index("--precision") + 1] == "bf16"
    avx2 = scenario.worker_command(Path("data"), native["AVX2, fp32, fused Adam"], "small")
    assert native["AVX2, fp32, fused Adam"]["path"] == "AVX2" and avx2[avx2.index("--optimizer") + 1] == "fused"
    one = scenario.worker_command(Path("data"), native["native, bf16, 1 thread"], "full")
    assert one[one.index("--threads") + 1] == "1" and one[one.index("--updates") + 1] == "60"
    assert scenario.PATHS["AVX2"]["ATEN_CPU_CAPABILITY"] == "avx2"
    # inductor's kernels of the forced path apart from the native path's (it reused those: NaN)
    assert (
        "TORCHINDUCTOR_CACHE_DIR" in scenario.PATHS["AVX2"]
        and "TORCHINDUCTOR_CACHE_DIR" not in scenario.PATHS["native"]
    )


def test_programs_can_be_chosen_by_name(scenario: ModuleType) -> None:
    plan = scenario.programs(native_bf16=True, native_avx2=False)
    assert list(scenario.chosen(plan, "AVX2, fp32, fused Adam; AVX2, fp32")) == ["AVX2, fp32", "AVX2, fp32, fused Adam"]
    assert scenario.chosen(plan, None) == plan
    with pytest.raises(SystemExit, match="no program 'AVX2, bf16'"):
        scenario.chosen(plan, "AVX2, bf16")


def test_a_rows_speed_ratio_names_the_program_it_is_against(scenario: ModuleType) -> None:
    rounds = [{"capability": "AVX2", "precision": "fp32", "src_tgt_tok_per_s": 100.0, "gflops": 50.0}]
    peak = {"gflops": 100.0, "cores": 2, "ghz": 2.5, "flops_per_cycle_per_core": 32}
    line = scenario.row("AVX2, fp32, compiled", rounds, peak, {"src_tgt_tok_per_s": 0.75}, "AVX2, fp32")
    assert line["tok/s vs AVX2, fp32"] == 0.75 and "tok/s vs native fp32" not in line
    assert line["% of fp32 peak"] == 50.0


def test_a_workers_nested_figures_become_medians(scenario: ModuleType) -> None:
    result = {"seconds": 2.0, "matmul_gflops": {"fp32": 50.0}, "shares": {"matmul": 0.5}, "other_top_us": {"x": 1}}
    assert scenario.flat(result) == {"seconds": 2.0, "matmul_fp32_gflops": 50.0, "share_matmul": 0.5}


def test_ops_are_grouped_by_region_first_then_by_the_nearest_op(work: ModuleType) -> None:
    update = work.UPDATE
    cases = {
        (update, "aten::linear", "aten::addmm"): "matmul",
        (update, "aten::linear", "aten::t", "aten::transpose"): "matmul",
        (update, "mkldnn::_linear_pointwise"): "matmul",  # mtkit.model.onednn's float32 training products
        (update, "autograd::engine::evaluate_function: _LinearBackward", "_LinearBackward", "aten::sum"): "matmul",
        (update, "autograd::engine::evaluate_function: MmBackward0", "MmBackward0", "aten::mm"): "matmul",
        (update, work.ATTENTION, "aten::matmul", "aten::bmm"): "attention",
        (update, work.ATTENTION, "aten::softmax", "aten::_softmax"): "softmax",
        (update, "autograd::engine::evaluate_function: SoftmaxBackward0", "aten::_softmax_backward_data"): "softmax",
        (update, "autograd::engine::evaluate_function: BmmBackward0", "BmmBackward0", "aten::bmm"): "attention",
        (update, "aten::layer_norm", "aten::native_layer_norm"): "layer_norm",
        (update, "NativeLayerNormBackward0", "aten::native_layer_norm_backward"): "layer_norm",
        (update, work.DROPOUT, "aten::ge"): "dropout",
        (update, "_ScaleByMaskBackward", "aten::mul"): "dropout",
        (update, "aten::linear", "aten::to", "aten::_to_copy", "aten::copy_"): "casts",
        (update, work.LOSS, "aten::mm"): "loss",
        (update, "_ProjectedSmoothedCrossEntropyBackward", "aten::mm"): "loss",
        (update, "Optimizer.step#Adam.step", "aten::_foreach_addcdiv_"): "optimizer",
        (update, "aten::_foreach_mul_"): "optimizer",
        (update, work.DATA, "aten::from_numpy"): "data",
        (update, "aten::embedding", "aten::index_select"): "other",
        (update,): "other",
    }
    assert {path: work.group_of(path) for path in cases} == cases


def test_shares_sum_to_one_and_other_names_its_largest_ops(work: ModuleType) -> None:
    rows = [
        ((work.UPDATE, "aten::mm"), 600.0),
        ((work.UPDATE, work.LOSS, "aten::log_softmax"), 200.0),
        ((work.UPDATE, "aten::cat"), 150.0),
        ((work.UPDATE,), 50.0),
    ]
    shares, other = work.group_shares(rows)
    assert set(shares) == set(work.GROUPS) and sum(shares.values()) == pytest.approx(1.0)
    assert (shares["matmul"], shares["loss"], shares["other"], shares["data"]) == (0.6, 0.2, 0.2, 0.0)
    assert other == {"aten::cat": 150, work.UPDATE: 50}


def test_compiled_updates_are_left_out_of_the_rate_and_counted_as_compile_time(work: ModuleType) -> None:
    def update(seconds: float, graphs: int) -> dict[str, float]:
        return {"seconds": seconds, "src_tokens": 100, "tgt_tokens": 100, "graphs": graphs}

    warmup = [update(60.0, 30), update(5.0, 2)]  # every warm-up update compiled: the steady time is the window's
    records = [update(1.0, 0), update(11.0, 1), update(1.0, 0)]
    figures = work.window_figures(records, compiled=True, warmup=warmup)
    assert figures["updates"] == 2 and figures["src_tgt_tok_per_s"] == 200.0
    assert (figures["compile_updates"], figures["window_compile_updates"]) == (3, 1)
    assert figures["compile_s"] == 59.0 + 4.0 + 10.0
    assert work.window_figures(records[:1], compiled=False)["s_per_update"] == 1.0
