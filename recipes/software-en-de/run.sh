#!/usr/bin/env bash
# The software demo: collect this machine's German gettext catalogs (whole packages held out for valid and test),
# preprocess them, train the small recipe for MINUTES, average, translate the held-out packages' strings with beam 4,
# and score them with sacreBLEU.
# Usage (from the project root): MINUTES=15 PY=.venv/bin/python bash recipes/software-en-de/run.sh
set -euo pipefail
PY=${PY:-python3}
MINUTES=${MINUTES:-15}
OUT=demo-run/software  # the recipe's paths name this folder
RECIPE=recipes/software-en-de/small.toml
mtkit() { "$PY" -m mtkit "$@"; }
start=$(date +%s)

rm -rf "$OUT/catalogs" "$OUT/data" "$OUT/run"
mkdir -p "$OUT"
echo "== collect catalogs" >&2
mtkit collect-catalogs --target-lang de --out "$OUT/catalogs"
echo "== preprocess" >&2
mtkit preprocess --config "$RECIPE" --out "$OUT/data"
echo "== train ($MINUTES minutes)" >&2
mtkit train "$OUT/data" --save-dir "$OUT/run" --config "$RECIPE" --max-time "$MINUTES"
echo "== average" >&2
mtkit average "$OUT/run" --last 3
# The held-out packages' pairs as line files, written by collect-catalogs: the same pairs as the test split.
LINES=$OUT/catalogs/lines
echo "== translate the test packages (beam 4)" >&2
mtkit translate "$OUT/run" --beam 4 --input "$LINES/test.en" --output "$OUT/test.hyp.de"
echo "== score" >&2
mtkit score --ref "$LINES/test.de" "$OUT/test.hyp.de" | tee "$OUT/score.txt"
# The validation packages, on which settings would be chosen (the test packages never are).
mtkit translate "$OUT/run" --beam 4 -q --input "$LINES/valid.en" --output "$OUT/valid.hyp.de"
echo "validation: $(mtkit score --ref "$LINES/valid.de" "$OUT/valid.hyp.de" | head -n 1)" | tee "$OUT/val-score.txt"
echo
echo "Examples (source / mtkit / reference):"
for n in 1 2 3; do
    echo "  src: $(sed -n "${n}p" "$LINES/test.en")"
    echo "  hyp: $(sed -n "${n}p" "$OUT/test.hyp.de")"
    echo "  ref: $(sed -n "${n}p" "$LINES/test.de")"
    echo
done
echo "demo wall time: $(( $(date +%s) - start )) s"
