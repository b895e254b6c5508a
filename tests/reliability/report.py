"""Run the reliability suite and print each test's headline figure, for quoting in the README or a report.

    .venv/bin/python tests/reliability/report.py             # runs pytest tests/reliability, then prints
    .venv/bin/python tests/reliability/report.py FILE.jsonl  # prints a report written earlier

Each test appends {"test", "figure", ...} to $MTKIT_RELIABILITY_REPORT when that variable is set.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def run_suite(report: Path) -> int:
    env = {**os.environ, "MTKIT_RELIABILITY_REPORT": str(report), "OMP_NUM_THREADS": "1"}
    return subprocess.call(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(HERE)], cwd=ROOT, env=env
    )


def print_figures(report: Path) -> None:
    records = [json.loads(line) for line in report.read_text(encoding="utf-8").splitlines() if line.strip()]
    width = max((len(r["test"]) for r in records), default=0)
    for item in records:
        print(f"{item['test']:<{width}}  {item['figure']}")


def main() -> int:
    if len(sys.argv) > 1:
        print_figures(Path(sys.argv[1]))
        return 0
    with tempfile.TemporaryDirectory() as folder:
        report = Path(folder) / "reliability.jsonl"
        report.touch()
        code = run_suite(report)
        print(f"\nreliability figures (pytest exit {code}):")
        print_figures(report)
    return code


if __name__ == "__main__":
    sys.exit(main())
