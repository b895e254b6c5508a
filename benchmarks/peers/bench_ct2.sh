#!/usr/bin/env bash
# CTranslate2 peer: convert the Measure-B checkpoint of fairseq and/or OpenNMT-py (trained by
# bench_fairseq.sh / bench_onmt.sh), then Measure C (+ BLEU/chrF) in float32 and int8.
# Usage: bench_ct2.sh [STAGE ...]   stages: install convert translate   (default: all)
# Env:  PEERS=~/.cache/mtkit-peers DATA=$PEERS/runs/data RUN=$PEERS/runs/ct2 SOURCES="fairseq onmt"
#       COMPUTE_TYPES="float32 int8" THREADS=2 BEAM=4 GEN_BATCH=64 CT2_PKG=ctranslate2==4.8.5
# The converters import the source toolkit, so ctranslate2 is also pip-installed into the fairseq / onmt
# venvs for the conversion only; translation runs from the dedicated $PEERS/ct2 venv.
# --unsafe_deserialization: the checkpoints are our own and hold pickled args/vocab (torch>=2.6 refuses them).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PEERS=${PEERS:-$HOME/.cache/mtkit-peers}
DATA=${DATA:-$PEERS/runs/data}
RUN=${RUN:-$PEERS/runs/ct2}
VENV=${VENV:-$PEERS/ct2}
SOURCES=${SOURCES:-fairseq onmt}
COMPUTE_TYPES=${COMPUTE_TYPES:-float32 int8}
THREADS=${THREADS:-2}
BEAM=${BEAM:-4}
GEN_BATCH=${GEN_BATCH:-64}
CT2_PKG=${CT2_PKG:-ctranslate2==4.8.5}
TOOLS_PY=${TOOLS_PY:-$PEERS/tools/bin/python}
U="$TOOLS_PY $HERE/benchutil.py"
export OMP_NUM_THREADS=$THREADS PYTHONUNBUFFERED=1 TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1
mkdir -p "$RUN"
STAGES=${*:-install convert translate}

for st in $STAGES; do
case $st in
install)
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q "$CT2_PKG"
  for s in $SOURCES; do "$PEERS/$s/bin/pip" install -q "$CT2_PKG"; done
  "$VENV/bin/python" -c "import ctranslate2; print('ctranslate2', ctranslate2.__version__)"
  touch "$VENV/.installed"
  ;;
convert)
  for s in $SOURCES; do
    rm -rf "$RUN/$s.model"
    case $s in
      fairseq) "$PEERS/fairseq/bin/ct2-fairseq-converter" --model_path "$PEERS/runs/fairseq/B/checkpoint_last.pt" \
                 --data_dir "$PEERS/runs/fairseq/bin" --output_dir "$RUN/$s.model" --unsafe_deserialization > "$RUN/$s.convert.log" 2>&1 ;;
      onmt)    CK=$(ls -t "$PEERS"/runs/onmt/B/model_step_*.pt | head -1)
               # OpenNMT-py 3.5.1 on torch>=2 stores self_attn_type=scaled-dot-flash (same maths, uses
               # torch SDPA); the converter only accepts scaled-dot, so convert a copy with that option reset.
               "$PEERS/onmt/bin/python" -c "import sys, torch; c = torch.load(sys.argv[1], map_location='cpu', weights_only=False); c['opt'].self_attn_type = 'scaled-dot'; torch.save(c, sys.argv[2])" "$CK" "$RUN/onmt.ckpt.pt"
               CK=$RUN/onmt.ckpt.pt
               "$PEERS/onmt/bin/ct2-opennmt-py-converter" --model_path "$CK" \
                 --output_dir "$RUN/$s.model" --unsafe_deserialization > "$RUN/$s.convert.log" 2>&1 ;;
    esac
    echo "converted $s -> $RUN/$s.model ($(du -sh "$RUN/$s.model" | cut -f1))"
  done
  ;;
translate)  # beam BEAM, CTranslate2 default length_penalty=1, max_batch_size GEN_BATCH examples
  for s in $SOURCES; do for ct in $COMPUTE_TYPES; do
    P="$RUN/$s.$ct"
    /usr/bin/time -v -o "$P.time" "$VENV/bin/python" "$HERE/ct2_translate.py" "$RUN/$s.model" \
        "$DATA/spm/test.en" "$P.hyp.pieces" "$ct" "$BEAM" "$GEN_BATCH" "$THREADS" > "$P.log" 2>&1
    echo "== $s $ct"; cat "$P.log"
    $U rss "$P.time"
    $U score "$P.hyp.pieces" "$DATA/raw/test.de" "$DATA/spm.model" "$P.hyp.detok"
  done; done 2>&1 | tee "$RUN/C.result"
  ;;
*) echo "unknown stage $st"; exit 2;;
esac
done
