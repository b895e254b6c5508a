"""The one way mtkit's benchmarks measure: a command as a child process (wall, CPU and peak RSS from os.wait4),
alternating rounds with medians and ratios to a baseline of the same run, identical-line counts, a machine stamp
and one results writer (benchmarks/results/<scenario>-<date>-<commit>.{json,md}).
Stdlib only at import time, so its logic is tested in milliseconds; it knows no scenario.
"""

from __future__ import annotations

import datetime
import gzip
import http.client
import itertools
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / "bench-out"  # inputs and outputs of runs (data, models, translations); never committed
RESULTS = Path(__file__).resolve().parent / "results"
CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8")


@dataclass
class Measurement:
    """One finished child process: whole-process wall seconds, user+sys CPU seconds, peak RSS, exit code."""

    wall_s: float
    cpu_s: float
    peak_rss_mib: float
    returncode: int
    stdout: str = field(default="", repr=False)
    stderr: str = field(default="", repr=False)


@dataclass
class Running:
    """A started child: its process and start time; finish() turns it into a Measurement."""

    process: subprocess.Popen
    start: float
    stdout_path: Path
    stderr_path: Path


def thread_env(threads: int = 2, **extra: str) -> dict[str, str]:
    """The environment of every measured child: the same thread counts for torch, MKL and OpenMP."""
    return {
        **os.environ,
        "OMP_NUM_THREADS": str(threads),
        "MKL_NUM_THREADS": str(threads),
        "PYTHONUNBUFFERED": "1",
        **extra,
    }


def start(cmd: Sequence[str], log: Path, env: dict[str, str] | None = None, stdin: Path | None = None) -> Running:
    """Start `cmd` with stdout to log.out and stderr to log.err (files, so a chatty child never blocks)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    out, err = log.with_suffix(".out"), log.with_suffix(".err")
    with open(out, "wb") as o, open(err, "wb") as e, open(stdin or os.devnull, "rb") as i:
        process = subprocess.Popen(list(cmd), stdin=i, stdout=o, stderr=e, env=env or thread_env(), cwd=ROOT)
    return Running(process, time.monotonic(), out, err)


def finish(running: Running, timeout_s: float = 3600, stop: bool = False) -> Measurement:
    """Wait for the child (SIGTERM first when `stop`) and read its rusage.

    os.wait4 reports the child's own rusage plus that of the descendants it waited for, so a server's
    workers count too; ru_maxrss is the largest single process (KiB on Linux), not a sum.
    """
    pid = running.process.pid
    if stop:
        running.process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            running.process.kill()
            done, status, usage = os.wait4(pid, 0)
            break
        time.sleep(0.02)
    wall = time.monotonic() - running.start
    running.process.returncode = os.waitstatus_to_exitcode(status)
    return Measurement(
        round(wall, 3),
        round(usage.ru_utime + usage.ru_stime, 3),
        round(usage.ru_maxrss / 1024, 1),
        running.process.returncode,
        running.stdout_path.read_text(errors="replace"),
        running.stderr_path.read_text(errors="replace"),
    )


def measure(
    cmd: Sequence[str], log: Path, env: dict[str, str] | None = None, stdin: Path | None = None, timeout_s: float = 3600
) -> Measurement:
    """Run `cmd` to its end as a child process and measure it."""
    return finish(start(cmd, log, env, stdin), timeout_s)


def checked(m: Measurement, what: str) -> Measurement:
    """The measurement, or SystemExit with the tail of the child's stderr."""
    if m.returncode != 0:
        tail = "\n".join(m.stderr.splitlines()[-15:])
        raise SystemExit(f"{what} failed with exit code {m.returncode}:\n{tail}")
    return m


def alternate(programs: dict[str, Callable[[int], dict[str, float]]], rounds: int) -> dict[str, list[dict[str, float]]]:
    """Run each program once per round in the order given (A, B, A, B, ...), so a machine that slows down
    or speeds up during the run shifts every program alike. A program takes the round number and returns
    its figures; the first program is the baseline of `ratios`."""
    results: dict[str, list[dict[str, float]]] = {name: [] for name in programs}
    for round_ in range(rounds):
        for name, program in programs.items():
            print(f"round {round_ + 1}/{rounds}: {name}", file=sys.stderr, flush=True)
            results[name].append(program(round_))
    return results


def medians(rounds: list[dict[str, float]]) -> dict[str, float]:
    """The median of each numeric figure over the rounds (a figure missing from a round is left out there)."""
    keys = [k for k in rounds[0] if isinstance(rounds[0][k], (int, float))] if rounds else []
    return {k: round(statistics.median(r[k] for r in rounds if k in r), 3) for k in keys}


def ratios(results: dict[str, list[dict[str, float]]], baseline: str | None = None) -> dict[str, dict[str, float]]:
    """Each program's median figures divided by the baseline's (the first program unless named)."""
    base = medians(results[baseline or next(iter(results))])
    return {
        name: {k: round(v / base[k], 3) for k, v in medians(rounds).items() if base.get(k)}
        for name, rounds in results.items()
    }


def read_lines(path: Path, count: int | None = None) -> list[str]:
    """The lines of a text file (gzipped when its name ends in .gz) without their newlines: all, or the first
    `count`."""
    with (gzip.open if path.suffix == ".gz" else open)(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in itertools.islice(f, count)]


def write_lines(path: Path, lines: Sequence[str]) -> Path:
    """`lines` written to `path`, one a line (its folder made): the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def output_lines(cmd: Sequence[str]) -> list[str]:
    """The output of a translation command: the file after its `-o`, else its fifth word (a bare script's output
    argument)."""
    return Path(cmd[cmd.index("-o") + 1] if "-o" in cmd else cmd[4]).read_text(encoding="utf-8").splitlines()


def translation_program(name: str, cmd: Sequence[str], lines: int, log: Path) -> Callable[[int], dict[str, float]]:
    """A round of a translation command (mtkit translate, or a bare script that logs as it does): its measured
    figures and sentences/s over its own decode time, from its `translated N lines in S s` line."""

    def once(round_: int) -> dict[str, float]:
        m = checked(measure(cmd, log), name)
        found = re.search(r"translated (\d+) lines in ([\d.]+) ?s", m.stderr)
        return {**figures(m), "sent_per_s": round(lines / float(found.group(2)), 1) if found else float("nan")}

    return once


def post_json(port: int, body: dict[str, Any], path: str = "/translate", timeout_s: float = 600) -> Any:
    """POST a JSON body to a local server: the JSON answer, or RuntimeError with the status and answer."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s)
    connection.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    answer = json.loads(response.read())
    if response.status != 200:
        raise RuntimeError(f"HTTP {response.status} for {json.dumps(body)[:200]}: {answer}")
    return answer


def wait_healthy(log: Path, deadline_s: float = 300) -> int:
    """The port of an `mtkit serve` from its log line, once its /health answers 200."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        found = re.search(r"on http://127\.0\.0\.1:(\d+) ", log.read_text(errors="replace") if log.is_file() else "")
        if found:
            try:
                connection = http.client.HTTPConnection("127.0.0.1", int(found.group(1)), timeout=5)
                connection.request("GET", "/health")
                if connection.getresponse().status == 200:
                    return int(found.group(1))
            except OSError:
                pass
        time.sleep(0.05)
    raise SystemExit(f"mtkit serve did not become healthy; see {log}")


def identical_lines(a: Sequence[str], b: Sequence[str]) -> int:
    """How many lines two outputs of the same input share at the same position."""
    if len(a) != len(b):
        raise ValueError(f"outputs differ in length: {len(a)} and {len(b)} lines")
    return sum(x == y for x, y in zip(a, b))


def cpu_facts(cpuinfo: str) -> dict[str, Any]:
    """CPU model and the instruction-set flags that decide mtkit's kernels, from /proc/cpuinfo text."""
    model = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.MULTILINE)
    flags = re.search(r"^flags\s*:\s*(.+)$", cpuinfo, re.MULTILINE)
    present = set(flags.group(1).split()) if flags else set()
    family = re.search(r"^cpu family\s*:\s*(\d+)$", cpuinfo, re.MULTILINE)
    number = re.search(r"^model\s*:\s*(\d+)$", cpuinfo, re.MULTILINE)
    return {
        "cpu": model.group(1).strip() if model else platform.processor(),
        "family_model": f"{family.group(1)}/{number.group(1)}" if family and number else None,
        "flags": {f: f in present for f in CPU_FLAGS},
    }


def version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def git_commit() -> tuple[str, list[str]]:
    """The short commit, "+dirty" when tracked files under mtkit/ or benchmarks/ differ from it, and those files."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT).stdout

    commit = git("rev-parse", "--short", "HEAD").strip() or "unknown"
    status = git("status", "--porcelain", "--untracked-files=no", "mtkit", "benchmarks")
    changed = [line[3:] for line in status.splitlines()]
    return commit + ("+dirty" if changed else ""), changed


# What keeps torch, MKL and oneDNN to narrower kernels than the CPU has (the AVX2 paths forced on a bigger CPU).
KERNEL_ENV = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA")


def kernel_env() -> dict[str, str]:
    """The kernel-narrowing variables set in this process's environment ({}: the CPU's own kernels)."""
    return {name: os.environ[name] for name in KERNEL_ENV if os.environ.get(name)}


def machine_stamp() -> dict[str, Any]:
    """What the figures were measured on and with."""
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    commit, changed = git_commit()
    return {
        **cpu_facts(cpuinfo),
        "cores": os.cpu_count(),
        "kernel_env": kernel_env(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "python": platform.python_version(),
        "torch": version("torch"),
        "ctranslate2": version("ctranslate2"),
        "transformers": version("transformers"),
        "mtkit": version("mtkit"),
        "commit": commit,
        "changed_files": changed,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def markdown(scenario: str, stamp: dict[str, Any], command: str, rows: list[dict[str, Any]]) -> str:
    """A short table: one row per program, its columns in the order of the first row, then where it ran."""
    flags = ", ".join(f for f, on in stamp["flags"].items() if on) or "none of " + ", ".join(CPU_FLAGS)
    lines = [
        f"# {scenario}: {stamp['date']}, {stamp['commit']}",
        "",
        f"{stamp['cpu']}, {stamp['cores']} cores ({flags}); torch {stamp['torch']}, "
        f"ctranslate2 {stamp['ctranslate2']}, Python {stamp['python']}",
        "",
        f"`{command}`",
        "",
    ]
    if stamp.get("kernel_env"):
        forced = " ".join(f"{name}={value}" for name, value in stamp["kernel_env"].items())
        lines[4:4] = [f"Kernels narrowed by the environment: {forced}", ""]
    if stamp.get("changed_files"):
        lines[4:4] = [f"Uncommitted changes measured with the commit: {', '.join(stamp['changed_files'])}", ""]
    return "\n".join(lines + table(rows)) + "\n"


def table(rows: list[dict[str, Any]]) -> list[str]:
    """`rows` as the lines of a Markdown table, its columns in the order they first appear ([] without rows)."""
    if not rows:
        return []
    columns = list(dict.fromkeys(k for row in rows for k in row))
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    return lines + ["| " + " | ".join(str(row.get(c, "")) for c in columns) + " |" for row in rows]


def write_results(scenario: str, report: dict[str, Any], rows: list[dict[str, Any]], out: Path = RESULTS) -> Path:
    """Write <scenario>-<date>-<commit>.json (stamp, command, report) and .md (the rows); return the .json path."""
    stamp = machine_stamp()
    command = (
        " ".join(["python", "benchmarks/run.py", *sys.argv[1:]])
        if sys.argv[0].endswith("run.py")
        else " ".join(sys.argv)
    )
    # a run on narrowed kernels is another measurement than the CPU's own on the same day and commit
    narrowed = "-" + stamp["kernel_env"].get("ATEN_CPU_CAPABILITY", "narrowed").lower() if stamp["kernel_env"] else ""
    name = f"{scenario}-{stamp['date'][:10]}-{stamp['commit']}{narrowed}"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(
        json.dumps({"machine": stamp, "command": command, "rows": rows, **report}, indent=2, default=str) + "\n"
    )
    (out / f"{name}.md").write_text(markdown(scenario, stamp, command, rows))
    print(markdown(scenario, stamp, command, rows))
    return out / f"{name}.json"


def figures(m: Measurement) -> dict[str, float]:
    """The figures every measured program reports."""
    return {k: v for k, v in asdict(m).items() if k in ("wall_s", "cpu_s", "peak_rss_mib")}


def child_program(scenario: str, name: str, small: bool) -> Callable[[int], dict[str, float]]:
    """A round of `run.py SCENARIO --worker NAME` in its own process: its measured figures and the figures it
    prints on a `RESULT {json}` line."""

    def once(round_: int) -> dict[str, float]:
        cmd = [sys.executable, str(ROOT / "benchmarks" / "run.py"), scenario, "--worker", name]
        m = checked(measure(cmd + (["--small"] if small else []), WORK / "logs" / f"{scenario}-{name}"), name)
        line = next(x for x in m.stdout.splitlines() if x.startswith("RESULT "))
        return {**figures(m), **json.loads(line[len("RESULT ") :])}

    return once
