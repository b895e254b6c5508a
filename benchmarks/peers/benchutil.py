#!/usr/bin/env python3
"""Shared helpers for the multi30k-small peer benchmarks (run with the tools venv python).

Subcommands:
  ts                         prefix every stdin line with a unix timestamp (seconds, 3 decimals)
  rss TIMEFILE               print peak RSS (MiB) and elapsed wall (s) from a /usr/bin/time -v output file
  speed LOG.ts STEPS.tsv [FIRST LAST]
                             Measure A: STEPS.tsv has columns  step  src_tokens  tgt_tokens  (non-padding,
                             one row per update); LOG.ts is the timestamped training log, in which the
                             per-update lines are found by the regex in env STEP_RE (group 1 = update number).
                             Reports tokens/s over updates FIRST..LAST (default 51..300), timed from the
                             log line of update FIRST-1 to the log line of update LAST.
  score HYP_PIECES REF_RAW SPM_MODEL OUT_DETOK
                             decode space-separated spm pieces -> text, write OUT_DETOK, print BLEU + chrF
                             (sacrebleu defaults: 13a tokenizer, BLEU on detokenized text) and token counts.
"""

import os
import re
import sys
import time


def cmd_ts():
    for line in sys.stdin:
        sys.stdout.write(f"{time.time():.3f} {line}")
        sys.stdout.flush()


def parse_time_v(path):
    txt = open(path).read()
    rss_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", txt).group(1))
    el = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", txt).group(1)
    parts = [float(x) for x in el.split(":")]
    secs = 0.0
    for p in parts:
        secs = secs * 60 + p
    user = float(re.search(r"User time \(seconds\): ([\d.]+)", txt).group(1))
    sys_ = float(re.search(r"System time \(seconds\): ([\d.]+)", txt).group(1))
    return rss_kb / 1024.0, secs, user + sys_


def cmd_rss(path):
    rss, wall, cpu = parse_time_v(path)
    print(f"peak_rss_mib={rss:.0f} wall_s={wall:.1f} cpu_s={cpu:.1f} avg_cores={cpu / max(wall, 1e-9):.2f}")


def cmd_speed(log, steps_tsv, first=51, last=300):
    step_re = re.compile(os.environ.get("STEP_RE", r"num_updates=(\d+)"))
    stamp = {}
    for line in open(log, encoding="utf-8", errors="replace"):
        m = step_re.search(line)
        if m:
            t = float(line.split(" ", 1)[0])
            stamp.setdefault(int(m.group(1)), t)
    src = tgt = 0
    n = 0
    for line in open(steps_tsv):
        if not line.strip() or line.startswith("#"):
            continue
        s, a, b = line.split()[:3]
        s = int(s)
        if first <= s <= last:
            src += int(a)
            tgt += int(b)
            n += 1
    if first - 1 not in stamp or last not in stamp:
        have = sorted(stamp)
        sys.exit(f"missing log stamps for updates {first - 1} / {last}; have {have[:5]}...{have[-5:]}")
    dt = stamp[last] - stamp[first - 1]
    print(
        f"updates={first}-{last} n={n} seconds={dt:.2f} src_tok={src} tgt_tok={tgt} "
        f"src+tgt_tok/s={(src + tgt) / dt:.0f} tgt_tok/s={tgt / dt:.0f} s/update={dt / n:.3f} "
        f"tgt_tok/update={tgt / n:.0f}"
    )


def cmd_score(hyp, ref, spm_model, out):
    import sacrebleu
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=spm_model)
    hyps_p = [line.rstrip("\n") for line in open(hyp, encoding="utf-8")]
    hyps = [sp.decode_pieces(h.split()) for h in hyps_p]
    refs = [line.rstrip("\n") for line in open(ref, encoding="utf-8")]
    assert len(hyps) == len(refs), (len(hyps), len(refs))
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(hyps) + "\n")
    bleu = sacrebleu.corpus_bleu(hyps, [refs])
    chrf = sacrebleu.corpus_chrf(hyps, [refs])
    ntok = sum(len(h.split()) for h in hyps_p)
    print(f"BLEU={bleu.score:.2f} chrF={chrf.score:.2f} hyp_spm_tokens={ntok} (no EOS) lines={len(hyps)}")
    print(f"  {bleu}  |  {chrf}  | sacrebleu {sacrebleu.__version__}")


if __name__ == "__main__":
    c, args = sys.argv[1], sys.argv[2:]
    if c == "ts":
        cmd_ts()
    elif c == "rss":
        cmd_rss(*args)
    elif c == "speed":
        a = list(args[:2]) + [int(x) for x in args[2:]]
        cmd_speed(*a)
    elif c == "score":
        cmd_score(*args)
    else:
        sys.exit(__doc__)
