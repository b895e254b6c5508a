#!/usr/bin/env python3
"""Translate space-separated spm pieces with a CTranslate2 model and report timing.
Usage: ct2_translate.py MODEL_DIR SRC_PIECES OUT_PIECES COMPUTE_TYPE [BEAM] [BATCH] [THREADS]
Prints: load_s, translate_s (excluding load), sentences/s, generated target tokens/s (spm pieces, no EOS).
Decoding options are CTranslate2 defaults except beam_size / max_batch_size (length_penalty=1, i.e. score
normalised by length; max_decoding_length=256).
"""

import sys
import time

t0 = time.time()
import ctranslate2  # noqa: E402

model, src, out, ctype = sys.argv[1:5]
beam = int(sys.argv[5]) if len(sys.argv) > 5 else 4
batch = int(sys.argv[6]) if len(sys.argv) > 6 else 64
threads = int(sys.argv[7]) if len(sys.argv) > 7 else 2
lines = [line.split() for line in open(src, encoding="utf-8")]
t1 = time.time()
tr = ctranslate2.Translator(model, device="cpu", compute_type=ctype, inter_threads=1, intra_threads=threads)
t2 = time.time()
res = tr.translate_batch(lines, beam_size=beam, max_batch_size=batch, batch_type="examples")
t3 = time.time()
hyps = [r.hypotheses[0] for r in res]
with open(out, "w", encoding="utf-8") as f:
    for h in hyps:
        f.write(" ".join(h) + "\n")
ntok = sum(len(h) for h in hyps)
dt = t3 - t2
print(
    f"ctranslate2 {ctranslate2.__version__} compute_type={ctype} beam={beam} max_batch_size={batch} "
    f"intra_threads={threads}"
)
print(
    f"import_s={t1 - t0:.2f} load_s={t2 - t1:.2f} translate_s={dt:.2f} sents={len(hyps)} "
    f"sent/s={len(hyps) / dt:.1f} gen_tokens={ntok} (no EOS) tok/s={ntok / dt:.0f} "
    f"tok/s_incl_EOS={(ntok + len(hyps)) / dt:.0f}"
)
