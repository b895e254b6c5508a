#!/usr/bin/env bash
# fairseq peer on the multi30k-small workload (en->de). See README.md.
# Usage: bench_fairseq.sh [STAGE ...]     stages: install prep speed budget translate   (default: all, in order)
# Env:  PEERS=~/.cache/mtkit-peers  DATA=$PEERS/runs/data  RUN=$PEERS/runs/fairseq  UPDATES=300  MINUTES=10
#       THREADS=2  BEAM=4  GEN_BATCH=64  FAIRSEQ_PKG=fairseq-fixed==0.12.3.1
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PEERS=${PEERS:-$HOME/.cache/mtkit-peers}
DATA=${DATA:-$PEERS/runs/data}
RUN=${RUN:-$PEERS/runs/fairseq}
VENV=${VENV:-$PEERS/fairseq}
UPDATES=${UPDATES:-300}
MINUTES=${MINUTES:-10}
THREADS=${THREADS:-2}
BEAM=${BEAM:-4}
GEN_BATCH=${GEN_BATCH:-64}
FAIRSEQ_PKG=${FAIRSEQ_PKG:-fairseq-fixed==0.12.3.1}
TOOLS_PY=${TOOLS_PY:-$PEERS/tools/bin/python}
U="$TOOLS_PY $HERE/benchutil.py"
# torch>=2.6 defaults torch.load(weights_only=True); fairseq checkpoints hold an argparse.Namespace.
export OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS PYTHONUNBUFFERED=1 TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1
mkdir -p "$RUN"
STAGES=${*:-install prep speed budget translate}

# Model/optimisation config shared by speed (A) and budget (B) runs.
ARCH=(--arch transformer --share-all-embeddings
  --encoder-layers 3 --decoder-layers 3 --encoder-embed-dim 256 --decoder-embed-dim 256
  --encoder-ffn-embed-dim 1024 --decoder-ffn-embed-dim 1024
  --encoder-attention-heads 4 --decoder-attention-heads 4
  --dropout 0.1 --criterion label_smoothed_cross_entropy --label-smoothing 0.1
  --optimizer adam --adam-betas '(0.9,0.98)' --lr 1e-3 --lr-scheduler inverse_sqrt
  --warmup-updates 1000 --warmup-init-lr 1e-7 --max-tokens 4096
  --cpu --num-workers 0 --seed 1 --log-format simple)

for st in $STAGES; do
case $st in
install)
  [ -x "$TOOLS_PY" ] || { python3 -m venv "$PEERS/tools"; "$PEERS/tools/bin/pip" install -q sentencepiece sacrebleu; }
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q torch==2.13.0
  # the sdist builds C++/Cython extensions against torch; build isolation would pull a CUDA torch into the
  # build env, so build against the venv's CPU torch instead.
  "$VENV/bin/pip" install -q 'cython<3.1' numpy setuptools wheel
  "$VENV/bin/pip" install -q --no-build-isolation "$FAIRSEQ_PKG"
  "$VENV/bin/python" -c "import fairseq, torch; print('fairseq', fairseq.__version__, 'torch', torch.__version__)"
  # last, so that an install stopped half way is not taken for a finished one (make bench-peers-install and
  # run.py train --peers look for it)
  touch "$VENV/.installed"
  ;;
prep)
  rm -f "$RUN/.prepared"  # made again at the end, as install's marker is
  [ -f "$DATA/spm/train.en" ] || "$HERE/prep_data.sh" "$DATA"
  rm -rf "$RUN/bin"
  "$VENV/bin/fairseq-preprocess" --source-lang en --target-lang de \
    --trainpref "$DATA/spm/train" --validpref "$DATA/spm/valid" --testpref "$DATA/spm/test" \
    --joined-dictionary --destdir "$RUN/bin" --workers 1 > "$RUN/preprocess.log" 2>&1
  grep -E "Dictionary|\[en\]|\[de\]" "$RUN/preprocess.log" | tail -4
  touch "$RUN/.prepared"
  ;;
speed)   # Measure A: UPDATES updates, no checkpoint, no validation, log every update
  /usr/bin/time -v -o "$RUN/A.time" "$VENV/bin/fairseq-train" "$RUN/bin" "${ARCH[@]}" \
     --max-update "$UPDATES" --log-interval 1 --no-save --disable-validation 2>&1 | $U ts > "$RUN/A.log"
  # exact per-update src/tgt token counts (same batches as the run: same seed/epoch/iterator args)
  "$VENV/bin/python" "$HERE/fairseq_batches.py" "$RUN/bin" "$UPDATES" > "$RUN/A.steps.tsv"
  # cross-check: logged wpb (target tokens incl. EOS per update) must equal reconstructed tgt tokens
  "$TOOLS_PY" - "$RUN/A.log" "$RUN/A.steps.tsv" <<'EOF'
import re, sys
logged = {}
for l in open(sys.argv[1]):
    m = re.search(r"num_updates=(\d+).*", l)
    w = re.search(r"wpb=([\d.]+)", l)
    if m and w: logged[int(m.group(1))] = float(w.group(1))
bad = [(int(s), float(t), logged.get(int(s))) for s, a, t in (x.split()[:3] for x in open(sys.argv[2]) if not x.startswith('#'))
       if int(s) in logged and abs(logged[int(s)] - float(t)) > 0.5]
print(f"wpb cross-check: {len(logged)} logged updates, {len(bad)} mismatches", bad[:3])
EOF
  STEP_RE='num_updates=([0-9]+)' $U speed "$RUN/A.log" "$RUN/A.steps.tsv" 51 "$UPDATES" | tee "$RUN/A.result"
  $U rss "$RUN/A.time" | tee -a "$RUN/A.result"
  ;;
budget)  # Measure B (training part): MINUTES of training via --stop-time-hours, then save checkpoint_last.pt
  rm -rf "$RUN/B"; mkdir -p "$RUN/B"
  H=$("$TOOLS_PY" -c "print($MINUTES/60)")
  /usr/bin/time -v -o "$RUN/B.time" "$VENV/bin/fairseq-train" "$RUN/bin" "${ARCH[@]}" \
     --max-update 1000000 --stop-time-hours "$H" --log-interval 50 --disable-validation \
     --save-dir "$RUN/B" --no-epoch-checkpoints 2>&1 | $U ts > "$RUN/B.log"
  grep -E "num_updates=" "$RUN/B.log" | tail -1
  grep -E "done training|end of epoch" "$RUN/B.log" | tail -2
  $U rss "$RUN/B.time" | tee "$RUN/B.result"
  ;;
translate)  # Measure C + B scoring: beam BEAM, lenpen default (1.0), batch GEN_BATCH sentences
  /usr/bin/time -v -o "$RUN/C.time" "$VENV/bin/fairseq-generate" "$RUN/bin" --path "$RUN/B/checkpoint_last.pt" \
     --gen-subset test --beam "$BEAM" --batch-size "$GEN_BATCH" --cpu --num-workers 0 \
     > "$RUN/C.gen" 2> "$RUN/C.stderr"
  grep -E "^H-" "$RUN/C.gen" | sed 's/^H-//' | sort -n -k1,1 | cut -f3 > "$RUN/C.hyp.pieces"
  grep -E "Translated|Generate test" "$RUN/C.gen" "$RUN/C.stderr" | sed 's/^.*| INFO | //' | tee "$RUN/C.result"
  $U rss "$RUN/C.time" | tee -a "$RUN/C.result"
  $U score "$RUN/C.hyp.pieces" "$DATA/raw/test.de" "$DATA/spm.model" "$RUN/C.hyp.detok" | tee "$RUN/B.score"
  ;;
*) echo "unknown stage $st"; exit 2;;
esac
done
