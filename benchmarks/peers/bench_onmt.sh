#!/usr/bin/env bash
# OpenNMT-py peer on the multi30k-small workload (en->de). See README.md.
# Usage: bench_onmt.sh [STAGE ...]     stages: install prep speed budget translate   (default: all, in order)
# Env:  PEERS=~/.cache/mtkit-peers  DATA=$PEERS/runs/data  RUN=$PEERS/runs/onmt  UPDATES=300  MINUTES=10
#       STEPS=<budget steps; default: derived from the speed run so training lasts ~MINUTES>
#       THREADS=2  BEAM=4  GEN_BATCH=64  ONMT_PKG=opennmt-py==3.5.1
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PEERS=${PEERS:-$HOME/.cache/mtkit-peers}
DATA=${DATA:-$PEERS/runs/data}
RUN=${RUN:-$PEERS/runs/onmt}
VENV=${VENV:-$PEERS/onmt}
UPDATES=${UPDATES:-300}
MINUTES=${MINUTES:-10}
THREADS=${THREADS:-2}
BEAM=${BEAM:-4}
GEN_BATCH=${GEN_BATCH:-64}
ONMT_PKG=${ONMT_PKG:-opennmt-py==3.5.1}
TOOLS_PY=${TOOLS_PY:-$PEERS/tools/bin/python}
U="$TOOLS_PY $HERE/benchutil.py"
# torch>=2.6 defaults torch.load(weights_only=True); OpenNMT-py 3.5.1 checkpoints hold vocab + opts objects.
export OMP_NUM_THREADS=$THREADS MKL_NUM_THREADS=$THREADS PYTHONUNBUFFERED=1 TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1
mkdir -p "$RUN"
STAGES=${*:-install prep speed budget translate}

write_cfg() {  # $1 = config path, $2 = train_steps, $3 = save_model prefix, $4 = report_every
cat > "$1" <<EOF
save_data: $RUN/onmt_data
src_vocab: $RUN/vocab.shared
share_vocab: true
data:
  corpus_1:
    path_src: $DATA/spm/train.en
    path_tgt: $DATA/spm/train.de
  valid:
    path_src: $DATA/spm/valid.en
    path_tgt: $DATA/spm/valid.de
save_model: $3
save_checkpoint_steps: 10000000
keep_checkpoint: 1
train_steps: $2
valid_steps: 10000000
report_every: $4
seed: 1
num_workers: 0
model_dtype: fp32
# model
encoder_type: transformer
decoder_type: transformer
enc_layers: 3
dec_layers: 3
hidden_size: 256
word_vec_size: 256
transformer_ff: 1024
heads: 4
dropout: [0.1]
attention_dropout: [0.0]
position_encoding: true
share_embeddings: true
share_decoder_embeddings: true
add_qkvbias: true
# optimisation: noam == linear warm-up then inverse sqrt; peak = lr * 256^-0.5 * 1000^-0.5 = 1e-3
optim: adam
adam_beta1: 0.9
adam_beta2: 0.98
decay_method: noam
learning_rate: 0.50596
warmup_steps: 1000
max_grad_norm: 0
label_smoothing: 0.1
param_init: 0
param_init_glorot: true
normalization: tokens
batch_type: tokens
batch_size: 4096
accum_count: [1]
EOF
}

for st in $STAGES; do
case $st in
install)
  [ -x "$TOOLS_PY" ] || { python3 -m venv "$PEERS/tools"; "$PEERS/tools/bin/pip" install -q sentencepiece sacrebleu; }
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q torch==2.13.0
  # opennmt-py 3.5.1 pins torch<2.3; those torch wheels pull CUDA packages, so install it without deps on top
  # of the CPU torch 2.13.0 and add the runtime deps by hand (spacy/fasttext are imported unconditionally).
  "$VENV/bin/pip" install -q --no-deps "$ONMT_PKG"
  "$VENV/bin/pip" install -q configargparse pyyaml sacrebleu six sentencepiece 'ctranslate2>=4,<5' \
      'pyonmttok>=1.37,<2' rapidfuzz pyahocorasick spacy fasttext-wheel
  "$VENV/bin/python" -c "import onmt, torch; print('onmt', onmt.__version__, 'torch', torch.__version__)"
  # last, so that an install stopped half way is not taken for a finished one (make bench-peers-install and
  # run.py train --peers look for it)
  touch "$VENV/.installed"
  ;;
prep)
  rm -f "$RUN/.prepared"  # made again at the end, as install's marker is
  [ -f "$DATA/spm/train.en" ] || "$HERE/prep_data.sh" "$DATA"
  write_cfg "$RUN/vocab.yaml" 1 "$RUN/unused" 1
  "$VENV/bin/onmt_build_vocab" -config "$RUN/vocab.yaml" -n_sample -1 -overwrite > "$RUN/vocab.log" 2>&1
  wc -l "$RUN/vocab.shared"
  touch "$RUN/.prepared"
  ;;
speed)   # Measure A: UPDATES steps, no validation, no checkpoint (save step > train_steps), report every step
  rm -rf "$RUN/A"; mkdir -p "$RUN/A"
  write_cfg "$RUN/A.yaml" "$UPDATES" "$RUN/A/model" 1
  /usr/bin/time -v -o "$RUN/A.time" "$VENV/bin/onmt_train" -config "$RUN/A.yaml" 2>&1 | $U ts > "$RUN/A.log"
  # per-step tokens from the log: "bsz: SRC/TGT/SENTS" with report_every 1 is the exact count of that step.
  # OpenNMT-py counts src without EOS and tgt with EOS; add 1 EOS per sentence to src to match fairseq.
  "$TOOLS_PY" - "$RUN/A.log" > "$RUN/A.steps.tsv" <<'EOF'
import re, sys
print("# step src_tok(+EOS) tgt_tok(incl EOS) sents")
for l in open(sys.argv[1]):
    m = re.search(r"Step +(\d+)/ *\d+;.*bsz: +(\d+)/ *(\d+)/ *(\d+);", l)
    if m:
        s, a, b, n = map(int, m.groups())
        print(s, a + n, b, n)
EOF
  STEP_RE='Step +([0-9]+)/' $U speed "$RUN/A.log" "$RUN/A.steps.tsv" 51 "$UPDATES" | tee "$RUN/A.result"
  $U rss "$RUN/A.time" | tee -a "$RUN/A.result"
  ;;
budget)  # Measure B (training part). OpenNMT-py has no wall-clock stop option: train STEPS steps, where STEPS
         # defaults to MINUTES*60 / (s/update measured over updates 51-300 in the speed run).
  if [ -z "${STEPS:-}" ]; then
    SPU=$(grep -o 's/update=[0-9.]*' "$RUN/A.result" | cut -d= -f2)
    STEPS=$("$TOOLS_PY" -c "print(int($MINUTES*60/$SPU))")
  fi
  echo "budget: STEPS=$STEPS" | tee "$RUN/B.result"
  rm -rf "$RUN/B"; mkdir -p "$RUN/B"
  write_cfg "$RUN/B.yaml" "$STEPS" "$RUN/B/model" 50
  /usr/bin/time -v -o "$RUN/B.time" "$VENV/bin/onmt_train" -config "$RUN/B.yaml" 2>&1 | $U ts > "$RUN/B.log"
  grep -E "Step +[0-9]+/" "$RUN/B.log" | tail -1
  "$TOOLS_PY" - "$RUN/B.log" <<'EOF' | tee -a "$RUN/B.result"
import sys
ls = [l for l in open(sys.argv[1])]
st = [float(l.split()[0]) for l in ls if "Starting training" in l]
en = [float(l.split()[0]) for l in ls if "Step " in l and "tok/s" in l]
print(f"training wall (from 'Starting training' to last step log) = {(en[-1]-st[0])/60:.2f} min")
EOF
  $U rss "$RUN/B.time" | tee -a "$RUN/B.result"
  ;;
translate)  # Measure C + B scoring: beam BEAM, default length penalty (avg, alpha 1.0), batch GEN_BATCH sentences
  CK=$(ls -t "$RUN"/B/model_step_*.pt | head -1)
  /usr/bin/time -v -o "$RUN/C.time" "$VENV/bin/onmt_translate" -model "$CK" -src "$DATA/spm/test.en" \
     -output "$RUN/C.hyp.pieces" -beam_size "$BEAM" -batch_size "$GEN_BATCH" -batch_type sents -gpu -1 \
     -report_time > "$RUN/C.log" 2>&1
  grep -E "PRED SCORE|Total translation time|Average translation|Tokens per second" "$RUN/C.log" | sed 's/^.*INFO\] //' | tee "$RUN/C.result"
  $U rss "$RUN/C.time" | tee -a "$RUN/C.result"
  $U score "$RUN/C.hyp.pieces" "$DATA/raw/test.de" "$DATA/spm.model" "$RUN/C.hyp.detok" | tee "$RUN/B.score"
  ;;
*) echo "unknown stage $st"; exit 2;;
esac
done
