"""The training update against the machine's limit: achieved FLOP/s of the demo recipe's update (model FLOPs per
token from the shapes, benchmarks/flops.py, times tokens/s over timed updates after warm-up) against the CPU's
theoretical fp32 peak for its instruction set and clock, and against a matmul peak measured in the same process; on
torch's native kernels and forced to AVX2, in fp32 and in the recipe's precision; where the update's time goes (a
profile grouped by benchmarks/step_work.py); and the levers: a fused Adam, one thread, train.compile (compile time
and graphs counted apart). Each program is one benchmarks/step_work.py process; this module owns the peak
arithmetic, the programs and the table.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flops import flop_model
from harness import ROOT, WORK, alternate, checked, measure, medians, ratios, thread_env, write_results

from scenarios.workload import data

# What makes torch, MKL and oneDNN keep to their AVX2 kernels on a CPU with more; and inductor's own cache of
# compiled kernels, which under the forced capability reused the AVX-512 kernels of a native run in the shared one
# (NaN from update 1, torch 2.13).
FORCED_AVX2 = {
    "ATEN_CPU_CAPABILITY": "avx2",
    "MKL_ENABLE_INSTRUCTIONS": "AVX2",
    "ONEDNN_MAX_CPU_ISA": "AVX2",
    "TORCHINDUCTOR_CACHE_DIR": str(WORK / "inductor-avx2"),
}
PATHS = {"native": {}, "AVX2": FORCED_AVX2}
# (warm-up updates, timed updates, profiled updates, matmul seconds); compiled programs warm up longer, as the
# first shape changes recompile.
SIZES = {"small": (2, 3, 2, 0.3), "full": (10, 60, 5, 3.0)}
COMPILE_WARMUP = {"small": 2, "full": 20}
GROUPS = ("matmul", "attention", "softmax", "layer_norm", "dropout", "casts", "loss", "optimizer", "data", "other")


def physical_cores(cpuinfo: str) -> int:
    """Distinct (physical id, core id) pairs of /proc/cpuinfo: cores, not SMT siblings; 0 when it does not say."""
    pairs = set()
    for block in cpuinfo.split("\n\n"):
        socket = re.search(r"^physical id\s*:\s*(\d+)", block, re.MULTILINE)
        core = re.search(r"^core id\s*:\s*(\d+)", block, re.MULTILINE)
        if socket and core:
            pairs.add((socket.group(1), core.group(1)))
    return len(pairs)


def clock_ghz(cpuinfo: str, lscpu: str) -> tuple[float, str]:
    """The clock the peak is counted at and where it was read: /proc/cpuinfo's "cpu MHz" (the highest of the
    processors), else lscpu's "CPU max MHz" or "CPU MHz"; (0.0, "unknown") when neither says."""
    found = [float(x) for x in re.findall(r"^cpu MHz\s*:\s*([\d.]+)", cpuinfo, re.MULTILINE)]
    if found:
        return round(max(found) / 1000, 3), "/proc/cpuinfo cpu MHz"
    for key in ("CPU max MHz", "CPU MHz"):
        match = re.search(rf"^{key}:\s*([\d.]+)", lscpu, re.MULTILINE)
        if match:
            return round(float(match.group(1)) / 1000, 3), f"lscpu {key}"
    return 0.0, "unknown"


def fp32_flops_per_cycle(capability: str, flags: set[str], vendor: str, family: int, model: int) -> tuple[int, str]:
    """fp32 FLOPs per cycle and core of the kernels torch runs (`capability`, torch.backends.cpu.get_cpu_capability)
    on this CPU, and why: FMA units x lanes x 2."""
    amd = "AMD" in vendor
    if capability.upper().startswith("AVX512") and "avx512f" in flags:
        if amd and family == 25:
            return 32, "Zen 4 AVX-512: two 256-bit FMA pipes, a 512-bit FMA in two passes (2 x 8 x 2)"
        if amd:
            return 64, "AMD AVX-512 from Zen 5: two 512-bit FMA pipes (2 x 16 x 2)"
        return 64, "Intel AVX-512: two 512-bit FMA units assumed (2 x 16 x 2; one on some Silver, Bronze, client CPUs)"
    if capability.upper() in ("AVX2", "AVX512") and {"avx2", "fma"} <= flags:
        if amd and family == 23 and model < 0x30:
            return 16, "Zen 1 AVX2: two 128-bit FMA pipes (2 x 4 x 2)"
        return 32, "AVX2: two 256-bit FMA pipes (2 x 8 x 2)"
    if "avx" in flags and capability.upper() != "DEFAULT":
        return 16, "AVX without FMA: a 256-bit add and a 256-bit multiply (8 + 8)"
    return 8, "SSE: a 128-bit add and a 128-bit multiply (4 + 4)"


def theoretical_peak(capability: str, threads: int, cpuinfo: str, lscpu: str) -> dict[str, Any]:
    """The fp32 peak of the cores `threads` threads run on: cores x GHz x FLOPs/cycle/core, and what it used."""
    flags_line = re.search(r"^flags\s*:\s*(.+)$", cpuinfo, re.MULTILINE)
    flags = set(flags_line.group(1).split()) if flags_line else set()
    vendor = re.search(r"^vendor_id\s*:\s*(\S+)", cpuinfo, re.MULTILINE)
    family = re.search(r"^cpu family\s*:\s*(\d+)", cpuinfo, re.MULTILINE)
    model = re.search(r"^model\s*:\s*(\d+)", cpuinfo, re.MULTILINE)
    per_cycle, why = fp32_flops_per_cycle(
        capability,
        flags,
        vendor.group(1) if vendor else "",
        int(family.group(1)) if family else 0,
        int(model.group(1)) if model else 0,
    )
    ghz, clock_source = clock_ghz(cpuinfo, lscpu)
    cores = min(threads, physical_cores(cpuinfo) or threads)
    return {
        "capability": capability,
        "gflops": round(cores * ghz * per_cycle, 1),
        "cores": cores,
        "ghz": ghz,
        "clock_source": clock_source,
        "flops_per_cycle_per_core": per_cycle,
        "basis": why,
    }


def programs(native_bf16: bool, native_avx2: bool) -> dict[str, dict[str, Any]]:
    """Name -> (path, precision, threads, optimizer, compile): fp32 on both kernel paths, the recipe's precision
    where it differs (bf16 where native; forced AVX2 has none), and the levers at the recipe's precision; on a CPU
    with more than AVX2, the levers again in fp32 on the forced AVX2 kernels, the path of an AVX2-only CPU, where the
    recipe trains in fp32."""
    recipe = "bf16" if native_bf16 else "fp32"
    found = {"native, fp32": {"path": "native", "precision": "fp32"}}
    if native_bf16:
        found["native, bf16"] = {"path": "native", "precision": "bf16"}
    found["AVX2, fp32"] = {"path": "AVX2", "precision": "fp32"}
    found[f"native, {recipe}, fused Adam"] = {"path": "native", "precision": recipe, "optimizer": "fused"}
    found[f"native, {recipe}, 1 thread"] = {"path": "native", "precision": recipe, "threads": 1}
    found[f"native, {recipe}, compiled"] = {"path": "native", "precision": recipe, "compile": True}
    if not native_avx2:
        found["AVX2, fp32, fused Adam"] = {"path": "AVX2", "precision": "fp32", "optimizer": "fused"}
        found["AVX2, fp32, compiled"] = {"path": "AVX2", "precision": "fp32", "compile": True}
    return {name: {"threads": 2, "optimizer": "mtkit", "compile": False, **p} for name, p in found.items()}


def chosen(plan: dict[str, dict[str, Any]], names: str | None) -> dict[str, dict[str, Any]]:
    """The programs named in a ";"-separated list (their names hold commas; all when None), in the plan's order; an
    unknown name stops the run with the names there are."""
    if not names:
        return plan
    wanted = [n.strip() for n in names.split(";") if n.strip()]
    unknown = [n for n in wanted if n not in plan]
    if unknown:
        raise SystemExit(f"step_flops: no program {unknown[0]!r}; the programs: {'; '.join(plan)}")
    return {name: p for name, p in plan.items() if name in wanted}


def worker_command(data_dir: Path, program: dict[str, Any], size: str) -> list[str]:
    warmup, updates, profile, matmul = SIZES[size]
    cmd = [sys.executable, str(ROOT / "benchmarks" / "step_work.py"), str(data_dir)]
    cmd += ["--precision", program["precision"], "--threads", str(program["threads"])]
    cmd += ["--optimizer", program["optimizer"], "--updates", str(updates), "--profile", str(profile)]
    cmd += ["--warmup", str(COMPILE_WARMUP[size] if program["compile"] else warmup)]
    return cmd + ["--matmul-seconds", str(matmul)] + (["--compile"] if program["compile"] else [])


def flat(result: dict[str, Any]) -> dict[str, Any]:
    """A worker's RESULT with its nested figures as top-level numbers, so the harness takes their medians."""
    out = {k: v for k, v in result.items() if not isinstance(v, dict)}
    out.update({f"matmul_{k}_gflops": v for k, v in result.get("matmul_gflops", {}).items()})
    out.update({f"share_{k}": v for k, v in result.get("shares", {}).items()})
    return out


def program_runner(
    name: str, cmd: list[str], env: dict[str, str], per_token: tuple[float, float]
) -> Callable[[int], dict[str, Any]]:
    """A round of one program: its worker process, its RESULT line flattened, and its model GFLOP/s."""

    def once(round_: int) -> dict[str, Any]:
        log = WORK / "logs" / f"step_flops-{re.sub(r'[^A-Za-z0-9]+', '-', name)}"
        m = checked(measure(cmd, log, env=env), f"step_flops {name}")
        line = next(x for x in m.stdout.splitlines() if x.startswith("RESULT "))
        result = flat(json.loads(line[len("RESULT ") :]))
        flops = per_token[0] * result["src_tokens"] + per_token[1] * result["tgt_tokens"]
        result["gflops"] = round(flops / result["seconds"] / 1e9, 2)
        return {**result, "peak_rss_mib": m.peak_rss_mib}

    return once


def row(
    name: str, rounds: list[dict[str, Any]], peak: dict[str, Any], relative: dict[str, float], baseline: str
) -> dict[str, Any]:
    """One program's line of the table: medians over the rounds, its tokens/s against the baseline program's. A
    bf16 row is set against the fp32 peak too (the issue's yardstick) and against the bf16 matmul peak measured in
    its process; the peak's basis and clock source are in the JSON (`peaks`)."""
    first, mid = rounds[0], medians(rounds)
    # float32 updates run their products on oneDNN where the worker measured it (mtkit.model.onednn), else MKL
    matmul = mid.get(f"matmul_{first['precision']}_onednn_gflops") or mid.get(f"matmul_{first['precision']}_gflops")
    line: dict[str, Any] = {
        "program": name,
        "ISA": first["capability"],
        "tok/s": mid["src_tgt_tok_per_s"],
        f"tok/s vs {baseline}": relative.get("src_tgt_tok_per_s"),
        "GFLOP/s": mid["gflops"],
        "fp32 peak GFLOP/s": peak["gflops"],
        "peak = cores x GHz x FLOP/cycle": f"{peak['cores']} x {peak['ghz']} x {peak['flops_per_cycle_per_core']}",
        "% of fp32 peak": round(100 * mid["gflops"] / peak["gflops"], 1) if peak["gflops"] else None,
        "matmul GFLOP/s": matmul,
        "% of matmul": round(100 * mid["gflops"] / matmul, 1) if matmul else None,
    }
    line.update({f"{g} %": round(100 * mid[f"share_{g}"], 1) for g in GROUPS if f"share_{g}" in mid})
    if first.get("compile"):
        line.update(
            {"compile s": mid["compile_s"], "graphs": mid["graphs"], "compiling updates": mid["compile_updates"]}
        )
    return line


def run(args: argparse.Namespace) -> None:
    import torch

    from mtkit.model.precision import native_bf16

    data_dir = data()
    model = flop_model(data_dir, None)
    per_token = (model.per_src_token, model.per_tgt_token)
    size = "small" if args.small else "full"
    plan = chosen(programs(native_bf16("cpu"), torch.backends.cpu.get_cpu_capability() == "AVX2"), args.programs)
    runners = {
        name: program_runner(
            name,
            worker_command(data_dir, p, size),
            thread_env(p["threads"], **PATHS[p["path"]]),
            per_token,
        )
        for name, p in plan.items()
    }
    results = alternate(runners, args.rounds)
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout if shutil.which("lscpu") else ""
    peaks = {
        name: theoretical_peak(rounds[0]["capability"], plan[name]["threads"], cpuinfo, lscpu)
        for name, rounds in results.items()
    }
    relative = ratios(results)
    baseline = next(iter(results))  # ratios' baseline: the first program run
    rows = [row(name, rounds, peaks[name], relative[name], baseline) for name, rounds in results.items()]
    report = {
        "recipe": "recipes/multi30k-en-de/small.toml",
        "flop_per_src_token": round(model.per_src_token),
        "flop_per_tgt_token": round(model.per_tgt_token),
        "sizes": dict(zip(("warmup", "updates", "profiled", "matmul_s"), SIZES[size])),
        "programs": plan,
        "peaks": peaks,
        "rounds": results,
    }
    write_results("step_flops", report, rows)
