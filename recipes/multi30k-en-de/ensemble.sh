#!/usr/bin/env bash
# The ensemble teacher and its students, end to end and resumable: run it again after a stop (or kill -9) and each
# step goes on from where it stopped or is skipped when its output is whole.
#   1. SEEDS teacher.toml runs (seeds 1..SEEDS), each 8,000 updates, averaged;
#   2. the ensemble's length penalty chosen on val among PENALTIES, 0.6-3.0 (never on test), then test_2016_flickr
#      scored with it (sacreBLEU and lower-cased tokenized BLEU);
#   3. the ensemble's translations of the training sources (`mtkit distill --ensemble`), cleaned of runaways
#      (`mtkit clean-distilled --references`) and of the WORST fraction (default 0.05; 0 for none) of the pairs
#      the ensemble itself scores lowest per piece (`mtkit score-pairs --ensemble`, then clean-distilled's --scores
#      and --worst): +0.54 BLEU for the greedy 4+4 student (BENCHMARKS.md, "Students and the CPU levers");
#   4. the students of student-ensemble.toml and student-ensemble-deep.toml, trained on them and the references.
# Each step's figures land in $OUT/ensemble-of-$SEEDS/ (val-*.json, test.json, length_penalty, clean.json; with
# ENSEMBLE_MODE=linear, $OUT/ensemble-of-$SEEDS-linear/). Hours
# on a 2-core CPU: the teachers about 50 minutes each, the students 45-60 (85 each, two at once), the distillation
# about 5 (three teachers; Zen 4, 2026-11-27).
# Usage (from the project root): OUT=runs SEEDS=3 PY=.venv/bin/python bash recipes/multi30k-en-de/ensemble.sh
# Three seeds by default, as the students were distilled: the fourth added +0.18 on val to the log-linear ensemble
# and +0.01 to the linear one (SEEDS=4; BENCHMARKS.md, "The ensemble").
# On 2 cores two one-thread trainings at once make 1.22x the tokens/s of one two-thread run (Zen 4, 2026-11-26;
# BENCHMARKS.md, "A teacher"):
#   STEPS=students STUDENTS=student-ensemble OMP_NUM_THREADS=1 bash recipes/multi30k-en-de/ensemble.sh &
#   STEPS=students STUDENTS=student-ensemble-deep OMP_NUM_THREADS=1 bash recipes/multi30k-en-de/ensemble.sh
# The student recipes read the cleaned corpus as runs/ensemble-distilled-clean: keep OUT=runs (a link will do).
set -euo pipefail
PY=${PY:-python3}
OUT=${OUT:-runs}
SEEDS=${SEEDS:-3}
STEPS=${STEPS:-teachers,penalty,distill,students}
STUDENTS=${STUDENTS:-student-ensemble student-ensemble-deep}  # one each in two processes: both at once
# An ensemble of two gained on val up to 2.0 (40.39 at 0.6, 41.14 at 2.0): the grid goes past it.
PENALTIES=${PENALTIES:-0.6 1.0 1.5 2.0 2.5 3.0}
ENSEMBLE_MODE=${ENSEMBLE_MODE:-log-linear}  # or linear: how the teachers combine at each step (--ensemble-mode)
WORST=${WORST:-0.05}  # the fraction of the distilled pairs the ensemble scores lowest that take their references
DATA=data/multi30k
R=recipes/multi30k-en-de
mtkit() { "$PY" -m mtkit "$@"; }
step() { [[ ",$STEPS," == *",$1,"* ]]; }
ENS="$OUT/ensemble-of-$SEEDS"
[[ "$ENSEMBLE_MODE" == log-linear ]] || ENS="$ENS-$ENSEMBLE_MODE"
mkdir -p "$ENS"

if [[ ! -f "$OUT/teacher-data/manifest.json" ]]; then
    mtkit preprocess --config "$R/teacher.toml" --out "$OUT/teacher-data"
fi
if step teachers; then
    for seed in $(seq 1 "$SEEDS"); do  # a finished run ends at once: it is at max_steps
        mtkit train "$OUT/teacher-data" --save-dir "$OUT/teacher-$seed" --config "$R/teacher.toml" --set train.seed="$seed"
    done
fi
others=(--ensemble-mode "$ENSEMBLE_MODE")
for seed in $(seq 2 "$SEEDS"); do others+=(--ensemble "$OUT/teacher-$seed"); done

if step penalty; then
    gzip -dc "$DATA/val.en.gz" > "$ENS/val.en"
    gzip -dc "$DATA/test_2016_flickr.en.gz" > "$ENS/test.en"
    for lp in $PENALTIES; do
        if [[ ! -f "$ENS/val-$lp.json" ]]; then
            mtkit translate "$OUT/teacher-1" "${others[@]}" --length-penalty "$lp" -q \
                -i "$ENS/val.en" -o "$ENS/val-$lp.de"
            mtkit score --ref "$DATA/val.de.gz" --lc-tok --json "$ENS/val-$lp.de" > "$ENS/val-$lp.json.tmp"
            mv "$ENS/val-$lp.json.tmp" "$ENS/val-$lp.json"
        fi
    done
    "$PY" - "$ENS" $PENALTIES <<'EOF' > "$ENS/length_penalty"
import json, sys
from pathlib import Path
found = {lp: json.loads((Path(sys.argv[1]) / f"val-{lp}.json").read_text())["bleu"] for lp in sys.argv[2:]}
print(max(found, key=lambda lp: (found[lp], -float(lp))))  # the best val sacreBLEU; a tie goes to the smaller
EOF
    lp=$(cat "$ENS/length_penalty")
    # again when val chooses another penalty (a grid grown since): test.json is always the chosen one's
    if [[ ! -f "$ENS/test.json" || "$(cat "$ENS/test.length_penalty" 2>/dev/null)" != "$lp" ]]; then
        mtkit translate "$OUT/teacher-1" "${others[@]}" --length-penalty "$lp" -q \
            -i "$ENS/test.en" -o "$ENS/test.de"
        mtkit score --ref "$DATA/test_2016_flickr.de.gz" --lc-tok --json "$ENS/test.de" > "$ENS/test.json.tmp"
        echo "$lp" > "$ENS/test.length_penalty"
        mv "$ENS/test.json.tmp" "$ENS/test.json"
    fi
    echo "ensemble of $SEEDS, length penalty $lp (chosen on val): test $(cat "$ENS/test.json")" >&2
fi

if step distill; then
    lp=$(cat "$ENS/length_penalty")
    made=$(cat "$OUT/ensemble-distilled.seeds" 2>/dev/null || echo "$SEEDS $ENSEMBLE_MODE")
    if [[ "$made" != "$SEEDS $ENSEMBLE_MODE" ]]; then
        echo "$OUT/ensemble-distilled: made by an ensemble of $made, not $SEEDS $ENSEMBLE_MODE;" \
            "move it away to distill again" >&2
        exit 1
    fi
    echo "$SEEDS $ENSEMBLE_MODE" > "$OUT/ensemble-distilled.seeds"
    scores="$OUT/ensemble-distilled.scores.jsonl"
    if [[ ! -f "$OUT/ensemble-distilled.de" || -f "$OUT/ensemble-distilled.progress.json" ]]; then
        rm -f "$scores"  # the scores of another corpus
        mtkit distill "$OUT/teacher-1" "${others[@]}" --length-penalty "$lp" --input "$DATA/train.en.gz" \
            --out "$OUT/ensemble-distilled" --json
    fi
    worst=()
    if [[ "$WORST" != 0 ]]; then  # the ensemble scores its own translations; the worst take their references
        if [[ ! -f "$scores" ]]; then
            mtkit score-pairs "$OUT/teacher-1" "${others[@]}" --source "$OUT/ensemble-distilled.en" \
                --target "$OUT/ensemble-distilled.de" --json -o "$scores.tmp"
            mv "$scores.tmp" "$scores"
        fi
        worst=(--scores "$scores" --worst "$WORST")
    fi
    mtkit clean-distilled "$OUT/ensemble-distilled" --source-lang en --target-lang de --references "$DATA/train" \
        "${worst[@]}" --out "$OUT/ensemble-distilled-clean" --json > "$ENS/clean.json"
fi

if step students; then
    for name in $STUDENTS; do
        if [[ ! -f "$OUT/$name-data/manifest.json" ]]; then
            mtkit preprocess --config "$R/$name.toml" --out "$OUT/$name-data"
        fi
        mtkit train "$OUT/$name-data" --save-dir "$OUT/$name" --config "$R/$name.toml"
        mtkit shortlist "$OUT/$name" "$OUT/$name-data"
    done
fi
