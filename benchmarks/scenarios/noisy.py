"""Cleaning a noisy corpus with dual cross-entropy (`mtkit filter-pairs`) on the noise of Khayrallah and Koehn 2018.

The 29,000 Multi30k en-de training pairs, plus 10% of that (2,900 pairs) of each of five kinds of noise, each pair
made from its own training line (the lines drawn without repeats, random.Random(SEED)):
  misaligned      the line's English with the German of another line, drawn at random
  misordered      the line's English words (split on spaces, punctuation attached) shuffled; German as it is
  wrong_language  the line's English with the shipped French translation in place of the German
  untranslated    the line's English on both sides
  short           both sides cut to their first 3 words (split on spaces)
All five are in one corpus (K&K 2018 added one kind at a time), shuffled with the same generator; a label per line
(clean or the kind) is kept beside it. Every corpus is preprocessed with recipes/multi30k-en-de/small.toml's
cleaning but --no-filter-same, which would drop the untranslated pairs before training.

The scorers are trained on the noisy corpus itself, en -> de and de -> en, --minutes each with small.toml and
averaged: the realistic case, no clean data assumed (the clean Multi30k val set is only validated on at the end).
filter-pairs keeps the clean share (29,000 / 43,500); for each kind: its share of the lowest-scored 10% and the
share of it the filter removed. Then en -> de trained --minutes each on the noisy, the kept and the clean corpus
(the noisy one is the forward scorer: same recipe, data and budget), averaged, sacreBLEU on test_2016_flickr,
beam 4, torch engine. Everything is in bench-out/noisy/<lines>-lines-<minutes>-min/; a model whose average.pt
exists and finished scores are reused, so a killed run goes on. --lines N uses the first N training lines (checks).
"""

from __future__ import annotations

import argparse
import json
import random
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from harness import WORK, checked, measure, read_lines, write_results

from scenarios.multilingual import BILINGUAL, bleu, trained, updates
from scenarios.workload import MULTI30K, mtkit

SEED = 1
NOISE_SHARE = 0.1  # pairs of each kind, as a share of the clean pairs: 2,900 for Multi30k's 29,000
SHORT_WORDS = 3
KINDS = ("misaligned", "misordered", "wrong_language", "untranslated", "short")
BOTTOM_SHARE = 0.1  # the lowest-scored share of the corpus whose make-up is reported
Pairs = list[tuple[str, str]]


def misaligned(en: Sequence[str], de: Sequence[str], lines: Sequence[int], rng: random.Random) -> Pairs:
    """Line i's source with the target of a random other line."""
    pairs = []
    for i in lines:
        j = rng.randrange(len(de) - 1)
        pairs.append((en[i], de[j + (j >= i)]))  # j skips i
    return pairs


def misordered(en: Sequence[str], de: Sequence[str], lines: Sequence[int], rng: random.Random) -> Pairs:
    """Line i with its source words in random order."""
    pairs = []
    for i in lines:
        words = en[i].split()
        rng.shuffle(words)
        pairs.append((" ".join(words), de[i]))
    return pairs


def wrong_language(en: Sequence[str], other: Sequence[str], lines: Sequence[int]) -> Pairs:
    """Line i's source with its translation into another language than the target's."""
    return [(en[i], other[i]) for i in lines]


def untranslated(en: Sequence[str], lines: Sequence[int]) -> Pairs:
    """Line i's source copied as its target."""
    return [(en[i], en[i]) for i in lines]


def short(en: Sequence[str], de: Sequence[str], lines: Sequence[int], words: int = SHORT_WORDS) -> Pairs:
    """Line i with both sides cut to their first `words` words."""
    return [(" ".join(en[i].split()[:words]), " ".join(de[i].split()[:words])) for i in lines]


def noisy_corpus(
    en: Sequence[str], de: Sequence[str], fr: Sequence[str], per_kind: int, seed: int = SEED
) -> list[tuple[str, str, str]]:
    """The clean pairs and `per_kind` pairs of each kind from distinct lines, shuffled: (source, target, label)."""
    rng = random.Random(seed)
    drawn = rng.sample(range(len(en)), per_kind * len(KINDS))
    lines = dict(zip(KINDS, (drawn[k * per_kind : (k + 1) * per_kind] for k in range(len(KINDS)))))
    noise = {
        "misaligned": misaligned(en, de, lines["misaligned"], rng),
        "misordered": misordered(en, de, lines["misordered"], rng),
        "wrong_language": wrong_language(en, fr, lines["wrong_language"]),
        "untranslated": untranslated(en, lines["untranslated"]),
        "short": short(en, de, lines["short"]),
    }
    rows = [(s, t, "clean") for s, t in zip(en, de)]
    rows += [(s, t, kind) for kind, pairs in noise.items() for s, t in pairs]
    rng.shuffle(rows)
    return rows


def read_train(lang: str, lines: int | None) -> list[str]:
    return read_lines(MULTI30K / f"train.{lang}.gz", lines)


def write_corpora(out: Path, lines: int | None) -> tuple[Path, Path, list[str]]:
    """OUT/clean.{en,de} and OUT/noisy.{en,de,labels}, made afresh only when missing (filter-pairs resumes on the
    files' identity); returns both prefixes and the labels."""
    clean, noisy = out / "clean", out / "noisy"
    labels = Path(f"{noisy}.labels")
    if not labels.is_file():
        out.mkdir(parents=True, exist_ok=True)
        en, de, fr = (read_train(lang, lines) for lang in ("en", "de", "fr"))
        for lang, side in (("en", en), ("de", de)):
            Path(f"{clean}.{lang}").write_text("".join(line + "\n" for line in side), encoding="utf-8")
        rows = noisy_corpus(en, de, fr, round(NOISE_SHARE * len(en)))
        for column, suffix in enumerate(("en", "de")):
            Path(f"{noisy}.{suffix}").write_text("".join(row[column] + "\n" for row in rows), encoding="utf-8")
        labels.write_text("".join(row[2] + "\n" for row in rows), encoding="utf-8")  # last: it marks the set done
    return clean, noisy, labels.read_text(encoding="utf-8").splitlines()


def train_on(out: Path, name: str, prefix: Path, minutes: float, source: str = "en", target: str = "de") -> Path:
    files = [
        "--source-lang",
        source,
        "--target-lang",
        target,
        "--train",
        str(prefix),
        "--valid",
        str(MULTI30K / "val"),
        "--test",
        str(MULTI30K / "test_2016_flickr"),
        "--no-filter-same",
    ]
    return trained(name, ["--config", str(BILINGUAL), *files], BILINGUAL, minutes, out=out)


def filtered(out: Path, forward: Path, backward: Path, noisy: Path, keep: float) -> tuple[Path, dict]:
    """filter-pairs over the noisy corpus: the kept corpus's prefix and the command's summary (reused when done)."""
    prefix = out / "filtered"
    summary = Path(f"{prefix}.summary.json")
    if not summary.is_file():
        m = checked(
            measure(
                mtkit(
                    "filter-pairs",
                    "--forward",
                    str(forward),
                    "--backward",
                    str(backward),
                    "--source",
                    f"{noisy}.en",
                    "--target",
                    f"{noisy}.de",
                    "--out",
                    str(prefix),
                    "--keep",
                    repr(keep),
                    "--json",
                ),
                out / "filter-pairs",
            ),
            "filter-pairs",
        )
        summary.write_text(m.stdout.strip().splitlines()[-1] + "\n", encoding="utf-8")
    return prefix, json.loads(summary.read_text(encoding="utf-8"))


def ranking_rows(labels: list[str], scores: list[float | None], kept: list[bool]) -> list[dict]:
    """Per label: how many, its share of the lowest-scored BOTTOM_SHARE, and the share of it the filter removed."""
    # best first and unscored last, as mtkit.bulk.xent_filter.select ranks
    rated = sorted((i for i, s in enumerate(scores) if s is not None), key=lambda i: (-scores[i], i))  # type: ignore[operator]
    ranking = rated + [i for i, s in enumerate(scores) if s is None]
    bottom = ranking[len(ranking) - int(BOTTOM_SHARE * len(ranking)) :]
    in_bottom = Counter(labels[i] for i in bottom)
    removed = Counter(label for label, keep in zip(labels, kept) if not keep)
    counts = Counter(labels)
    return [
        {
            "kind": label,
            "pairs": counts[label],
            f"share of bottom {BOTTOM_SHARE:.0%} (%)": round(100 * in_bottom[label] / max(len(bottom), 1), 1),
            "removed": removed[label],
            "removed (% of kind)": round(100 * removed[label] / counts[label], 1),
        }
        for label in ("clean", *KINDS)
    ]


def kept_pairs(run: Path) -> int:
    """Training pairs left after preprocess's cleaning."""
    return json.loads((run.parent / "data" / "manifest.json").read_text())["splits"]["train"]["pairs"]


def run(args: argparse.Namespace) -> None:
    from mtkit.bulk.xent_filter import SCORES_SUFFIX, read_scores, select

    minutes, lines = args.minutes, args.lines
    out = WORK / "noisy" / f"{lines or 'all'}-lines-{minutes:g}-min"
    clean, noisy, labels = write_corpora(out, lines)
    keep = labels.count("clean") / len(labels)
    forward = train_on(out, "noisy-en-de", noisy, minutes)
    backward = train_on(out, "noisy-de-en", noisy, minutes, "de", "en")
    prefix, summary = filtered(out, forward, backward, noisy, keep)
    scores = read_scores(Path(f"{prefix}{SCORES_SUFFIX}"))
    selection = select(scores, keep=keep)  # the filter's own choice, pair by pair
    if sum(selection.kept) != summary["kept"]:
        raise SystemExit(f"selection of {sum(selection.kept)} pairs, but filter-pairs kept {summary['kept']}")
    rows = ranking_rows(labels, scores, selection.kept)
    runs = {
        "noisy": forward,
        "filtered": train_on(out, "filtered-en-de", prefix, minutes),
        "clean": train_on(out, "clean-en-de", clean, minutes),
    }
    for corpus, model in runs.items():
        rows.append(
            {
                "kind": f"en-de trained on {corpus}",
                "pairs after cleaning": kept_pairs(model),
                "updates": updates(model),
                f"BLEU ({minutes:g} min)": bleu(model, "de", False, out=out),
            }
        )
    write_results(
        "noisy",
        {
            "minutes": minutes,
            "lines": len(labels),
            "noise_per_kind": labels.count("misaligned"),
            "seed": SEED,
            "keep": keep,
            "filter": summary,
            "backward updates": updates(backward),
        },
        rows,
    )
