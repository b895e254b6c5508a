"""The benchmark harness's logic on fake programs: rusage of a child, medians and ratios, identical lines,
the machine stamp and the results writer."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from benchmarks import harness

CPUINFO = """processor\t: 0
cpu family\t: 25
model\t\t: 17
model name\t: AMD EPYC 9R14 96-Core Processor
flags\t\t: fpu sse avx2 avx512f avx512_bf16 avx512_vnni
"""


def test_measure_reads_cpu_and_peak_rss_of_the_child(tmp_path: Path) -> None:
    # 200 MiB touched and a busy loop: the child's own rusage, not the test process's
    code = "b = bytearray(200 * 2**20); s = sum(range(3 * 10**6)); print('done')"
    m = harness.measure([sys.executable, "-c", code], tmp_path / "child", timeout_s=60)
    assert m.returncode == 0 and m.stdout == "done\n"
    assert m.peak_rss_mib > 200
    assert 0 < m.cpu_s and 0 < m.wall_s < 60


def test_measure_reports_the_exit_code_and_stops_a_started_child(tmp_path: Path) -> None:
    assert harness.measure([sys.executable, "-c", "raise SystemExit(3)"], tmp_path / "fail").returncode == 3
    running = harness.start([sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "sleep")
    m = harness.finish(running, timeout_s=30, stop=True)
    assert m.returncode == -15 and m.wall_s < 30
    with pytest.raises(SystemExit, match="exit code -15"):
        harness.checked(m, "sleeper")


def test_alternate_runs_rounds_in_turn_and_ratios_use_medians() -> None:
    order: list[str] = []

    def program(name: str, values: list[float]):
        def run(round_: int) -> dict[str, float]:
            order.append(name)
            return {"wall_s": values[round_]}

        return run

    results = harness.alternate(
        {"base": program("base", [2.0, 9.0, 4.0]), "other": program("other", [1.0, 1.0, 3.0])}, rounds=3
    )
    assert order == ["base", "other"] * 3
    assert harness.medians(results["base"]) == {"wall_s": 4.0}
    assert harness.ratios(results) == {"base": {"wall_s": 1.0}, "other": {"wall_s": 0.25}}


def test_identical_lines_counts_same_positions_only() -> None:
    assert harness.identical_lines(["a", "b", "c"], ["a", "c", "b"]) == 1
    with pytest.raises(ValueError, match="3 and 2 lines"):
        harness.identical_lines(["a", "b", "c"], ["a", "b"])


def test_cpu_facts_from_cpuinfo() -> None:
    facts = harness.cpu_facts(CPUINFO)
    assert facts["cpu"] == "AMD EPYC 9R14 96-Core Processor" and facts["family_model"] == "25/17"
    assert facts["flags"]["avx512_bf16"] and facts["flags"]["avx512_vnni"] and not facts["flags"]["amx_tile"]


def test_write_results_names_files_by_scenario_date_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in harness.KERNEL_ENV:
        monkeypatch.delenv(name, raising=False)
    path = harness.write_results("fake", {"note": "x"}, [{"program": "a", "wall_s": 1.5}], out=tmp_path)
    report = json.loads(path.read_text())
    stamp = report["machine"]
    assert path.name == f"fake-{stamp['date'][:10]}-{stamp['commit']}.json"
    assert report["note"] == "x" and report["rows"] == [{"program": "a", "wall_s": 1.5}]
    table = path.with_suffix(".md").read_text()
    assert "| program | wall_s |" in table and "| a | 1.5 |" in table


def test_results_on_forced_avx2_kernels_say_so_in_name_and_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    forced = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    for name, value in forced.items():
        monkeypatch.setenv(name, value)
    path = harness.write_results("fake", {}, [{"program": "a"}], out=tmp_path)
    stamp = json.loads(path.read_text())["machine"]
    assert stamp["kernel_env"] == forced
    assert path.name == f"fake-{stamp['date'][:10]}-{stamp['commit']}-avx2.json"  # beside the native run's file
    table = path.with_suffix(".md").read_text()
    assert "Kernels narrowed by the environment: ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2" in table
