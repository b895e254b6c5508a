#!/usr/bin/env bash
# Data prep for the "multi30k-small" peer benchmark (en->de).
# Usage: prep_data.sh OUT_DIR [DATA_DIR]
#   OUT_DIR  : where spm model + encoded text are written
#   DATA_DIR : raw Multi30k gz files (default: the repository's data/multi30k, found from this script's place)
# Needs a python with sentencepiece installed; set PY=/path/to/python (default: $PEERS/tools/bin/python,
# created on demand with `python3 -m venv` + `pip install sentencepiece sacrebleu`).
# Writes:
#   OUT_DIR/raw/{train,valid,test}.{en,de}     raw text (gunzipped; valid = val, test = test_2016_flickr)
#   OUT_DIR/spm.model, spm.vocab               joint BPE, vocab 8000, trained on train.en + train.de
#   OUT_DIR/spm/{train,valid,test}.{en,de}     space-separated spm pieces (identical input for every peer)
#   OUT_DIR/stats.txt                          line and token counts
set -euo pipefail
OUT=${1:?usage: prep_data.sh OUT_DIR [DATA_DIR]}
DATA=${2:-$(cd "$(dirname "$0")/../../data/multi30k" && pwd)}
PEERS=${PEERS:-$HOME/.cache/mtkit-peers}
PY=${PY:-$PEERS/tools/bin/python}
if [ ! -x "$PY" ]; then
  python3 -m venv "$PEERS/tools"
  "$PEERS/tools/bin/pip" install -q sentencepiece sacrebleu
  PY=$PEERS/tools/bin/python
fi
mkdir -p "$OUT/raw" "$OUT/spm"
for l in en de; do
  zcat "$DATA/train.$l.gz" > "$OUT/raw/train.$l"
  zcat "$DATA/val.$l.gz" > "$OUT/raw/valid.$l"
  zcat "$DATA/test_2016_flickr.$l.gz" > "$OUT/raw/test.$l"
done
"$PY" - "$OUT" <<'EOF'
import sys, os, sentencepiece as spm
out = sys.argv[1]
spm.SentencePieceTrainer.train(
    input=f"{out}/raw/train.en,{out}/raw/train.de",
    model_prefix=f"{out}/spm", vocab_size=8000, model_type="bpe",
    character_coverage=1.0, input_sentence_size=0, shuffle_input_sentence=False,
    num_threads=2, seed_sentencepiece_size=1000000,
    # ids: 0 unk, 1 bos, 2 eos, 3 pad (pad/bos/eos are never emitted as pieces in the text files)
    unk_id=0, bos_id=1, eos_id=2, pad_id=3, minloglevel=2)
sp = spm.SentencePieceProcessor(model_file=f"{out}/spm.model")
stats = []
for split in ("train", "valid", "test"):
    for l in ("en", "de"):
        lines = open(f"{out}/raw/{split}.{l}", encoding="utf-8").read().split("\n")
        if lines and lines[-1] == "":
            lines = lines[:-1]
        pieces = sp.encode(lines, out_type=str)
        with open(f"{out}/spm/{split}.{l}", "w", encoding="utf-8") as f:
            for p in pieces:
                f.write(" ".join(p) + "\n")
        ntok = sum(len(p) for p in pieces)
        stats.append(f"{split}.{l}\tlines={len(lines)}\tspm_tokens={ntok}\tavg={ntok/len(lines):.2f}")
open(f"{out}/stats.txt", "w").write("\n".join(stats) + "\n")
print("\n".join(stats))
EOF
echo "prep_data: done -> $OUT"
