#!/usr/bin/env bash
# `make bench-peers`: the peers' multi30k-small benchmarks (shared scripts), then the same workload in mtkit,
# then the mtkit/peer ratios (training tok/s vs fairseq fp32; translation sent/s vs fairseq-generate and
# CTranslate2 fp32). About an hour on 2 cores: fairseq is built from source and trains 300 updates + MINUTES.
# Usage (from the project root): PY=.venv/bin/python MINUTES=15 bash benchmarks/peers.sh
# Env:  PEERS=~/.cache/mtkit-peers   peer venvs and runs (outside the repo)
#       PEER_SCRIPTS=../shared/bench/peers   the shared peer scripts (bench_fairseq.sh, bench_ct2.sh, ...)
#       MINUTES=10        Measure B budget for every toolkit (RESULTS.md used 15)
#       WITH_ONMT=0       1: also OpenNMT-py (+ its CTranslate2 conversion); another ~30 minutes
#       SKIP_PEERS=0      1: reuse the peers' existing results, run only mtkit and the ratios
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PY=${PY:-.venv/bin/python}
export PEERS=${PEERS:-$HOME/.cache/mtkit-peers}
export MINUTES=${MINUTES:-10}
PEER_SCRIPTS=${PEER_SCRIPTS:-$ROOT/../shared/bench/peers}
WITH_ONMT=${WITH_ONMT:-0}
SKIP_PEERS=${SKIP_PEERS:-0}
OUT=bench-out/peers
mkdir -p "$OUT"

[ -x "$PEER_SCRIPTS/bench_fairseq.sh" ] || { echo "no peer scripts at $PEER_SCRIPTS (set PEER_SCRIPTS)" >&2; exit 2; }

# Stages a peer still needs: install once, prep once, the Measure-B checkpoint once; speed + translate always.
peer_stages() {  # $1 = peer name (fairseq, onmt), $2 = its Measure-B checkpoint glob
  local stages=""
  [ -x "$PEERS/$1/bin/python" ] || stages="install"
  [ -d "$PEERS/runs/$1/bin" ] || [ -f "$PEERS/runs/$1/vocab.shared" ] || stages="$stages prep"
  stages="$stages speed"
  compgen -G "$2" > /dev/null || stages="$stages budget"
  echo "$stages translate"
}

if [ "$SKIP_PEERS" != 1 ]; then
  echo "== fairseq ($(peer_stages fairseq "$PEERS/runs/fairseq/B/checkpoint_last.pt"))" >&2
  # shellcheck disable=SC2046
  "$PEER_SCRIPTS/bench_fairseq.sh" $(peer_stages fairseq "$PEERS/runs/fairseq/B/checkpoint_last.pt")
  SOURCES=fairseq
  if [ "$WITH_ONMT" = 1 ]; then
    echo "== OpenNMT-py" >&2
    # shellcheck disable=SC2046
    "$PEER_SCRIPTS/bench_onmt.sh" $(peer_stages onmt "$PEERS/runs/onmt/B/model_step_*.pt")
    SOURCES="fairseq onmt"
  fi
  echo "== CTranslate2 ($SOURCES)" >&2
  CT2_STAGES="convert translate"
  [ -x "$PEERS/ct2/bin/python" ] || CT2_STAGES="install $CT2_STAGES"
  # shellcheck disable=SC2086
  SOURCES=$SOURCES "$PEER_SCRIPTS/bench_ct2.sh" $CT2_STAGES
fi

echo "== mtkit: Measure A (300 updates, fp32 and bf16)" >&2
OMP_NUM_THREADS=2 "$PY" benchmarks/bench_train.py --json --peers "$PEERS" > "$OUT/train.json"
echo "== mtkit: Measures B+C (train $MINUTES minutes in bf16, translate test_2016_flickr, beam 4)" >&2
OMP_NUM_THREADS=2 "$PY" benchmarks/bench_translate.py --json --train-minutes "$MINUTES" > "$OUT/translate.json"
echo "== mtkit against CTranslate2 on that same model (mtkit export; 3 alternating rounds)" >&2
OMP_NUM_THREADS=2 "$PY" benchmarks/bench_ct2_same_model.py --json --train-minutes "$MINUTES" > "$OUT/ct2-same.json"
"$PY" benchmarks/run.py --peers-ratios --peers "$PEERS"
echo "wrote $OUT/{train,translate,ct2-same,ratios}.json and bench-out/loss-curves.tsv" >&2
