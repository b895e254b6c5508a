#!/usr/bin/env bash
# The demo: preprocess Multi30k en-de (shipped in data/multi30k), train the small recipe for MINUTES,
# average, translate test_2016_flickr with beam 4, and score it with sacreBLEU.
# Usage (from the project root): MINUTES=15 PY=.venv/bin/python bash recipes/multi30k-en-de/run.sh
set -euo pipefail
PY=${PY:-python3}
MINUTES=${MINUTES:-15}
OUT=${OUT:-demo-run}
DATA=data/multi30k
mtkit() { "$PY" -m mtkit "$@"; }
start=$(date +%s)

rm -rf "$OUT/data" "$OUT/run"
mkdir -p "$OUT"
echo "== preprocess" >&2
mtkit preprocess --config recipes/multi30k-en-de/small.toml --out "$OUT/data"  # its data: $DATA
echo "== train ($MINUTES minutes)" >&2
mtkit train "$OUT/data" --save-dir "$OUT/run" --config recipes/multi30k-en-de/small.toml --max-time "$MINUTES"
echo "== average" >&2
mtkit average "$OUT/run" --last 3
echo "== translate test_2016_flickr (beam 4)" >&2
gzip -dc "$DATA/test_2016_flickr.en.gz" > "$OUT/test.en"
mtkit translate "$OUT/run" --beam 4 --input "$OUT/test.en" --output "$OUT/test.hyp.de"
echo "== score" >&2
mtkit score --ref "$DATA/test_2016_flickr.de.gz" "$OUT/test.hyp.de" | tee "$OUT/score.txt"
# The validation set, on which the recipe's settings are chosen (the test set never is).
gzip -dc "$DATA/val.en.gz" | mtkit translate "$OUT/run" --beam 4 -q > "$OUT/val.hyp.de"
echo "validation: $(mtkit score --ref "$DATA/val.de.gz" "$OUT/val.hyp.de" | head -n 1)" | tee "$OUT/val-score.txt"
echo
echo "Examples (source / mtkit / reference):"
gzip -dc "$DATA/test_2016_flickr.de.gz" > "$OUT/test.ref.de"
for n in 1 2 3; do
    echo "  src: $(sed -n "${n}p" "$OUT/test.en")"
    echo "  hyp: $(sed -n "${n}p" "$OUT/test.hyp.de")"
    echo "  ref: $(sed -n "${n}p" "$OUT/test.ref.de")"
    echo
done
echo "demo wall time: $(( $(date +%s) - start )) s"
