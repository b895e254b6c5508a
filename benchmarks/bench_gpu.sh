#!/usr/bin/env bash
# One command for a lent GPU: model fwd/bwd for base and big in bf16 (eager and, where bench_model.py offers it,
# torch.compile), real `mtkit train` throughput on Multi30k with base and big, and translation on the GPU.
# Prints tokens/s and MFU against a bf16 matmul peak measured in the same run; JSON goes to bench-out/gpu/.
# Usage (from the project root, after `make install` with a CUDA torch): PY=.venv/bin/python bash benchmarks/bench_gpu.sh
# Env:  UPDATES=300  MAX_TOKENS=16384 (per batch, padding included)  TRAIN_MINUTES=3 (model for translation)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PY=${PY:-.venv/bin/python}
UPDATES=${UPDATES:-300}
MAX_TOKENS=${MAX_TOKENS:-16384}
TRAIN_MINUTES=${TRAIN_MINUTES:-3}
OUT=bench-out/gpu
mkdir -p "$OUT"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}

"$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA device visible to torch')"
"$PY" -c "import torch; print('gpu:', torch.cuda.get_device_name(0), '| torch', torch.__version__, '| cuda', torch.version.cuda)"

# 1. Model forward+backward on synthetic batches (bench_model.py measures its own bf16 matmul peak -> MFU).
for preset in base big; do
  echo "== bench_model.py --device cuda --preset $preset (bf16)" >&2
  "$PY" benchmarks/bench_model.py --device cuda --preset "$preset" --json > "$OUT/model-$preset.json"
done

# 2. The real training loop (data, loss, Adam, logging) on Multi30k: tokens/s over updates 51..UPDATES, % of peak.
for preset in base big; do
  for compile in "" "--compile"; do
    echo "== bench_train.py --device cuda --arch $preset --max-tokens $MAX_TOKENS $compile (bf16)" >&2
    "$PY" benchmarks/bench_train.py --device cuda --arch "$preset" --max-tokens "$MAX_TOKENS" --precision bf16 \
        --updates "$UPDATES" --threads "$OMP_NUM_THREADS" $compile --json > "$OUT/train-$preset${compile:+-compile}.json"
  done
done

# 3. Translation on the GPU (a small model trained TRAIN_MINUTES on the GPU; beam 4, KV cache vs none).
echo "== bench_translate.py --device cuda (bf16, fp32)" >&2
"$PY" benchmarks/bench_translate.py --device cuda --dtype bf16,fp32 --train-minutes "$TRAIN_MINUTES" \
    --threads "$OMP_NUM_THREADS" --json > "$OUT/translate.json"

"$PY" - "$OUT" <<'EOF'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
for path in sorted(out.glob("model-*.json")):
    r = json.loads(path.read_text())
    for row in r["results"]:
        print(f"{path.stem:<22} {row['model']:<15} {row['dtype']:<5} {row['tgt_tokens_per_s']:>10.0f} tgt tok/s  "
              f"{row['tflops']:7.1f} TFLOP/s  MFU {row.get('mfu', 0):.1%} (peak {r['matmul_peak_tflops']:.0f} TFLOP/s)")
for path in sorted(out.glob("train-*.json")):
    r = json.loads(path.read_text())
    for row in r["runs"]:
        print(f"{path.stem:<22} mtkit train     {row['precision']:<5} {row['tgt_tok_per_s']:>10.0f} tgt tok/s  "
              f"{row['achieved_gflops'] / 1000:7.1f} TFLOP/s  MFU {row['pct_of_peak']:.1f}% "
              f"(peak {r['matmul_peak_gflops'][row['precision']] / 1000:.0f} TFLOP/s), {row['s_per_update']} s/update")
r = json.loads((out / "translate.json").read_text())
for row in r["runs"]:
    print(f"translate {row['dtype']:<5} {row['sent_per_s']:>8} sent/s {row['tgt_tok_per_s']:>8} tok/s  "
          f"KV cache {row['kv_cache']['speedup']}x  BLEU {row['bleu']}  batch-size changes alter "
          f"{row['batch_identity']['differing_from_alone']} lines")
EOF
