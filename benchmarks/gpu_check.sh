#!/usr/bin/env bash
# `make gpu-check`: the CUDA test subset (tests/gpu) and the GPU benchmark (benchmarks/bench_gpu_check.py) on a
# machine with CUDA; without CUDA one line and exit 0. Each part reports pass/fail and the next part still runs;
# the exit status is 1 when anything failed. Results, ready to paste into BENCHMARKS.md: $GPU_CHECK_OUT/summary.md.
#
#   bash benchmarks/gpu_check.sh [all|tests|bench] [bench_gpu_check.py options, e.g. --stages data,train]
# Env: PY (default .venv/bin/python when it exists, else python3: a machine with a CUDA torch but no .venv runs
#      this checkout through PYTHONPATH), GPU_CHECK_OUT (default bench-out/gpu-check).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PART=${1:-all}
shift || true
if [ -z "${PY:-}" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
OUT=${GPU_CHECK_OUT:-bench-out/gpu-check}
case "$PART" in all|tests|bench) ;; *) echo "usage: $0 [all|tests|bench] [bench options]" >&2; exit 2 ;; esac

if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "gpu-check: no CUDA device visible to $PY's torch; nothing to check (tests/gpu skip on a CPU)"
  exit 0
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
mkdir -p "$OUT"
"$PY" -c "import torch; print('gpu-check:', torch.cuda.get_device_name(0), '| torch', torch.__version__, '| CUDA', torch.version.cuda)"
status=0

if [ "$PART" != bench ]; then
  rm -f "$OUT/tests.jsonl" "$OUT/tests.xml"
  # 3 workers where pytest-xdist is there: the two compiled tests compile for minutes on the host's cores.
  workers=$("$PY" -c "import xdist" 2>/dev/null && echo "-n 3")
  GPU_CHECK_RECORD="$OUT/tests.jsonl" "$PY" -m pytest tests/gpu -v -rA -p no:cacheprovider --durations=0 $workers \
      --junitxml="$OUT/tests.xml" 2>&1 | tee "$OUT/tests.log"
  tests_rc=${PIPESTATUS[0]}
  echo "gpu-check: tests/gpu $([ "$tests_rc" = 0 ] && echo passed || echo "FAILED (pytest exit $tests_rc)")"
  [ "$tests_rc" = 0 ] || status=1
fi

if [ "$PART" != tests ]; then
  "$PY" benchmarks/bench_gpu_check.py --out "$OUT" "$@" 2>&1 | tee "$OUT/bench.log"
  bench_rc=${PIPESTATUS[0]}
  echo "gpu-check: benchmark $([ "$bench_rc" = 0 ] && echo passed || echo "FAILED (exit $bench_rc)")"
  [ "$bench_rc" = 0 ] || status=1
else
  "$PY" benchmarks/bench_gpu_check.py --out "$OUT" --summary-only > /dev/null
fi
echo "gpu-check: results in $OUT/summary.md"
exit $status
