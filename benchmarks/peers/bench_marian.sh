#!/usr/bin/env bash
# Marian (PyPI pymarian; C++ trainer behind a Python binding) on the multi30k-small workload: Measure A only
# (B/C were not run for lack of time; see RESULTS.md). See README.md.
# Usage: bench_marian.sh [STAGE ...]   stages: install speed   (default: both)
# Env:  PEERS=~/.cache/mtkit-peers DATA=$PEERS/runs/data RUN=$PEERS/runs/marian UPDATES=300 THREADS=2 MARIAN_PKG=pymarian==1.12.42
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PEERS=${PEERS:-$HOME/.cache/mtkit-peers}
DATA=${DATA:-$PEERS/runs/data}
RUN=${RUN:-$PEERS/runs/marian}
VENV=${VENV:-$PEERS/marian}
UPDATES=${UPDATES:-300}
THREADS=${THREADS:-2}
MARIAN_PKG=${MARIAN_PKG:-pymarian==1.12.42}
TOOLS_PY=${TOOLS_PY:-$PEERS/tools/bin/python}
U="$TOOLS_PY $HERE/benchutil.py"
export OMP_NUM_THREADS=$THREADS PYTHONUNBUFFERED=1
mkdir -p "$RUN"
STAGES=${*:-install speed}

for st in $STAGES; do
case $st in
install)
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "$MARIAN_PKG"
  "$VENV/bin/pymarian" --version 2>&1 | tail -1
  touch "$VENV/.installed"
  ;;
speed)  # Measure A. Marian sizes batches by TARGET words (--mini-batch-words 4096) and appends </s> to both
        # sides; its log gives target labels per update, not source tokens (src estimated, see RESULTS.md).
  rm -rf "$RUN/A"; mkdir -p "$RUN/A"
  /usr/bin/time -v -o "$RUN/A.time" "$VENV/bin/pymarian" --type transformer \
    --train-sets "$DATA/spm/train.en" "$DATA/spm/train.de" --vocabs "$RUN/A/vocab.yml" "$RUN/A/vocab.yml" \
    --model "$RUN/A/model.npz" --dim-emb 256 --transformer-dim-ffn 1024 --transformer-heads 4 \
    --enc-depth 3 --dec-depth 3 --tied-embeddings-all --transformer-postprocess dan \
    --transformer-dropout 0.1 --label-smoothing 0.1 --optimizer adam --optimizer-params 0.9 0.98 1e-09 \
    --learn-rate 0.001 --lr-warmup 1000 --lr-decay-inv-sqrt 1000 --mini-batch-words 4096 --max-length 256 \
    --cpu-threads "$THREADS" --after "${UPDATES}u" --disp-freq 1u --valid-freq 1000000u --save-freq 1000000u \
    --seed 1 --quiet-translation 2>&1 | $U ts > "$RUN/A.log"
  "$TOOLS_PY" - "$RUN/A.log" > "$RUN/A.steps.tsv" <<'EOF'
import re, sys
print("# step src_tok(estimated: tgt * 0.9687) tgt_labels(incl EOS)")
for l in open(sys.argv[1]):
    m = re.search(r"Up\. (\d+) : .*?Cost [-\d.e]+ \* ([\d,]+) @", l)  # "Cost <avg> * <labels this update> @ ..."
    if m:
        t = int(m.group(2).replace(",", ""))
        print(m.group(1), round(t * 443037 / 457331), t)
EOF
  STEP_RE='Up\. ([0-9]+) ' $U speed "$RUN/A.log" "$RUN/A.steps.tsv" 51 "$UPDATES" | tee "$RUN/A.result"
  $U rss "$RUN/A.time" | tee -a "$RUN/A.result"
  ;;
*) echo "unknown stage $st"; exit 2;;
esac
done
