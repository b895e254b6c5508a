"""Terms a client names, on test_2016_flickr en->de with --demo-run, in the setting of the WMT21 terminology task
(reference terms) and WMT23's random terms. Term sets built here: test_2016_flickr's sources and references,
tokenized into words, aligned by eflomal (mtkit.corpus.alignments) together with all 29,000 training pairs (5,000
with --small) for better statistics; a reference term is a one-to-one aligned pair of content words (4 letters or
more, not a stop word, once in its sentence on either side) aligned one-to-one at least twice in all the aligned
data (one-off links are mostly the aligner's errors), at most 2 a sentence. Random terms: for 200 sentences
(100 with --small), the sentence's first reference term's source word paired with another sentence's German noun
that the reference does not hold. Each sentence gets its own glossary, on the path of `mtkit translate --glossary
--no-guard` (mtkit.text.line_plan.prepare_line, the lines translated in one batch, the run's beam, a line whose
output lacks a term translated again by the method's next way), once for each of the glossary's methods
(mtkit.text.glossary.TERM_METHODS).

Reports exact-match term accuracy (the target as a whole word in the output, case-sensitive and not) without and
with the glossary by each method, sacreBLEU without and with, the random terms' rate, mtkit's own `applied` count
against the measured one, how many sentences each way took, and the seconds of 1,000 lines (200 with --small) with
a glossary of 1,000 entries by each method against none: the 1,000 most often aligned words (terms in almost every
line), and by the run's default method the 1,000 most often aligned words that none of the lines holds (the
matching alone) and 1,000 aligned words drawn at random (a glossary whose terms some lines hold).

Forced terms, for the random terms by each method and for the plain outputs (a table of its own in the .md, "forced"
in the .json, each sentence's outputs under "random_terms"): how many outputs hold the target exactly once, how many
replaced the model's own word (the reference's word aligned to the source term) of those whose plain output held it,
how many appended the target after a sentence break the source lacks, how many hold digits the source does not, and
chrF and BLEU against the references with the own word swapped for the target beside the plain outputs' against the
references as they are: term accuracy counts the word, not the sentence. The one module of the scenario (about 500
lines): its term sets, runner and measures are read together.

On CTranslate2 (run.py has no --engine): `python benchmarks/scenarios/terms.py --run RUN --engine ctranslate2
[--small]` writes benchmarks/results/terms-ctranslate2-<date>-<commit>.{json,md}; --engine torch, terms-<date>-...
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import random
import re
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: run as a script, not by run.py
from harness import read_lines as harness_read_lines  # noqa: E402
from harness import table, write_results  # noqa: E402

from scenarios.langid import read_lines  # noqa: E402
from scenarios.texts import append_notes, bleu, demo_run  # noqa: E402
from scenarios.workload import MULTI30K  # noqa: E402

WORD = re.compile(r"\w+(?:[-']\w+)*|[^\w\s]")
MIN_LETTERS = 4
TERMS_PER_SENTENCE = 2
SEED = 1
SENTENCE_BREAK = re.compile(r"[.!?]+(?!\d)(?=\W*\w)")
MIN_PAIR_COUNT = 2
STOP = {
    "en": set(
        "that this with from they them their there have been were will would what when where which while into onto "
        "over under some about after before each other than then these those very just also only more most such "
        "your like near down along front behind next another being does doing".split()
    ),
    "de": set(
        "eine einer einem einen eines sich sind wird werden wurde dass dies diese dieser diesem diesen dieses "
        "einem nach über unter neben beim auch noch sehr nicht oder aber durch gegen ohne während mehr einige "
        "andere anderen anderer ihre ihren ihrem ihrer seine seinen seinem seiner etwas hinter vorne vor".split()
    ),
}


@dataclass(frozen=True)
class Term:
    """A term asked for in one sentence: its source word as the source writes it, the target the output must hold."""

    line: int
    source: str
    target: str


def words(line: str) -> list[str]:
    """A line as words and punctuation marks (hyphenated words and apostrophes kept inside a word)."""
    return WORD.findall(line)


def content(word: str, lang: str) -> bool:
    """A word that can be a term: letters only, MIN_LETTERS or more, not a stop word."""
    return word.isalpha() and len(word) >= MIN_LETTERS and word.lower() not in STOP[lang]


def reference_terms(
    src: Sequence[list[str]],
    ref: Sequence[list[str]],
    links: Sequence[Sequence[tuple[int, int]]],
    counts: Counter[tuple[str, str]],
    min_count: int = MIN_PAIR_COUNT,
) -> list[Term]:
    """Up to TERMS_PER_SENTENCE one-to-one aligned content-word pairs a sentence, in source order, each word once in
    its sentence (lower-cased on the source, as glossaries match; as written on the target), each pair seen at least
    `min_count` times in `counts` (one_to_one_counts)."""
    terms = []
    for line, (s, r, pairs) in enumerate(zip(src, ref, links, strict=True)):
        src_links, tgt_links = Counter(i for i, _ in pairs), Counter(j for _, j in pairs)
        src_counts, ref_counts = Counter(w.lower() for w in s), Counter(r)
        found = [
            Term(line, s[i], r[j])
            for i, j in sorted(pairs)
            if src_links[i] == 1 and tgt_links[j] == 1 and content(s[i], "en") and content(r[j], "de")
            if src_counts[s[i].lower()] == 1 and ref_counts[r[j]] == 1 and counts[s[i].lower(), r[j]] >= min_count
        ]
        terms += found[:TERMS_PER_SENTENCE]
    return terms


def random_terms(terms: Sequence[Term], refs: Sequence[str], count: int, seed: int = SEED) -> list[Term]:
    """For `count` sentences drawn at random (seeded), the first reference term's source word with another German
    noun (capitalized) of the set that the sentence's reference does not hold as a word: a target the model would
    not choose."""
    first: dict[int, Term] = {}
    for term in terms:
        first.setdefault(term.line, term)
    nouns = sorted({t.target for t in terms if t.target[:1].isupper()})
    rng = random.Random(seed)
    lines = sorted(rng.sample(sorted(first), min(count, len(first))))
    chosen = []
    for line in lines:
        candidates = [n for n in nouns if not has_word(refs[line], n, case=False)]
        chosen.append(Term(line, first[line].source, rng.choice(candidates)))
    return chosen


def has_word(text: str, word: str, case: bool = True) -> bool:
    """`word` in `text` as a whole word (no letter or digit either side); `case` False ignores case."""
    return re.search(whole_word(word), text, 0 if case else re.IGNORECASE) is not None


def whole_word(word: str) -> str:
    """The pattern of `word` as a whole word: no letter or digit either side."""
    return rf"(?<!\w){re.escape(word)}(?!\w)"


def accuracy(terms: Sequence[Term], outputs: Sequence[str], case: bool = True) -> float:
    """The share of terms whose target the output of their line holds as a whole word."""
    if not terms:
        return 0.0
    return round(sum(has_word(outputs[t.line], t.target, case) for t in terms) / len(terms), 3)


def word_count(text: str, word: str) -> int:
    """How often `text` holds `word` as a whole word, in any case."""
    return len(re.findall(whole_word(word), text, re.IGNORECASE))


def own_words(terms: Sequence[Term], randoms: Sequence[Term]) -> list[str]:
    """Each random term's own word: the reference's word aligned to its source term (the target of its sentence's
    first reference term, whose source word random_terms took), the proxy for the word the model would choose."""
    first: dict[int, Term] = {}
    for term in terms:
        first.setdefault(term.line, term)
    return [first[t.line].target for t in randoms]


def appended(output: str, target: str, source: str = "") -> bool:
    """The target's first occurrence (whole word, any case) stands after the output's last sentence break (. ! or ?
    before more words, not a decimal point), where the output has more breaks than `source`: a sentence of its own
    tacked on ("Ein Hund rennt durch das Gras. Köter.")."""
    first = re.search(whole_word(target), output, re.IGNORECASE)
    breaks = [m.end() for m in SENTENCE_BREAK.finditer(output)]
    return bool(first and len(breaks) > len(SENTENCE_BREAK.findall(source)) and first.start() >= breaks[-1])


def replaced(output: str, own: str, target: str) -> bool:
    """The output holds the target and no longer the model's own word (whole words, any case)."""
    return word_count(output, target) > 0 and word_count(output, own) == 0


def invented_digits(source: str, output: str) -> bool:
    """The output holds a run of digits the source does not (a stand-in's copy, a looped number)."""
    return bool(set(re.findall(r"\d+", output)) - set(re.findall(r"\d+", source)))


def swapped_reference(reference: str, own: str, target: str) -> str:
    """The reference with its first whole-word `own` (as written, else in any case) replaced by `target`, given a
    capital where it starts the sentence; unchanged where it lacks `own`."""
    pattern = whole_word(own)
    found = re.search(pattern, reference) or re.search(pattern, reference, re.IGNORECASE)
    if not found:
        return reference
    start = not re.search(r"\w", reference[: found.start()])
    word = target[:1].upper() + target[1:] if start else target
    return reference[: found.start()] + word + reference[found.end() :]


def forced_row(
    name: str,
    outputs: Sequence[str],
    sources: Sequence[str],
    plain: Sequence[str],
    refs: Sequence[str],
    owns: Sequence[str],
    targets: Sequence[str],
) -> dict[str, Any]:
    """The forced-terms measures of one set of outputs (the plain ones too) of sentences each given one term,
    `owns[k]` the word the model would choose for it, `targets[k]` the glossary's: the target exactly once, the
    sentences whose plain output held the own word and of those the outputs that replaced it, the target appended,
    invented digits, chrF and BLEU against the references with the own word swapped for the target and against the
    references as they are."""
    import sacrebleu

    held = [k for k, (line, own) in enumerate(zip(plain, owns, strict=True)) if word_count(line, own)]
    swapped = [swapped_reference(r, o, t) for r, o, t in zip(refs, owns, targets, strict=True)]
    chrf, chrf_swapped = (sacrebleu.corpus_chrf(list(outputs), [list(r)]).score for r in (refs, swapped))
    return {
        "terms": name,
        "sentences": len(outputs),
        "target once": sum(word_count(x, t) == 1 for x, t in zip(outputs, targets, strict=True)),
        "own word held": len(held),
        "own word replaced": sum(replaced(outputs[k], owns[k], targets[k]) for k in held),
        "appended": sum(map(appended, outputs, targets, sources)),
        "invented digits": sum(map(invented_digits, sources, outputs)),
        "chrF, swapped refs": round(chrf_swapped, 2),
        "BLEU, swapped refs": bleu(outputs, swapped)[0],
        "chrF, refs": round(chrf, 2),
        "BLEU, refs": bleu(outputs, refs)[0],
    }


def per_line(terms: Sequence[Term]) -> dict[int, dict[str, str]]:
    """Each line's glossary, source term to target term."""
    glossaries: dict[int, dict[str, str]] = {}
    for term in terms:
        glossaries.setdefault(term.line, {})[term.source] = term.target
    return glossaries


def one_to_one_counts(src: Sequence[list[str]], tgt: Sequence[list[str]], links: Sequence) -> Counter[tuple[str, str]]:
    """How often each (lower-cased source word, target word) of content words is aligned one-to-one."""
    counts: Counter[tuple[str, str]] = Counter()
    for s, t, pairs in zip(src, tgt, links, strict=True):
        src_links, tgt_links = Counter(i for i, _ in pairs), Counter(j for _, j in pairs)
        counts.update(
            (s[i].lower(), t[j])
            for i, j in pairs
            if src_links[i] == 1 and tgt_links[j] == 1 and content(s[i], "en") and content(t[j], "de")
        )
    return counts


def frequent_pairs(counts: Counter[tuple[str, str]], size: int, absent_from: Sequence[str] = ()) -> dict[str, str]:
    """A glossary of `size` entries: the most often aligned source words, each with its most frequent target (the
    speed test's glossary: real words, found in many lines); with `absent_from`, only words none of those lines
    holds as a glossary finds them (any case, between non-word characters), so that a glossary costs its matching
    alone."""
    held = {word for line in absent_from for word in re.findall(r"\w+", line.lower())}
    glossary: dict[str, str] = {}
    for (source, target), _ in counts.most_common():
        if source not in held:
            glossary.setdefault(source, target)
    return dict(list(glossary.items())[:size])


def sampled_pairs(counts: Counter[tuple[str, str]], size: int, seed: int = SEED) -> dict[str, str]:
    """A glossary of `size` entries drawn at random (seeded) from the source words aligned one-to-one at least
    MIN_PAIR_COUNT times, each with its most frequent target: a glossary of real words as a user's might be, whose
    terms some lines hold and most do not (between frequent_pairs' and an absent glossary's)."""
    best: dict[str, str] = {}
    for (source, target), count in counts.most_common():
        if count >= MIN_PAIR_COUNT:
            best.setdefault(source, target)
    chosen = random.Random(seed).sample(sorted(best), min(size, len(best)))
    return {source: best[source] for source in chosen}


class Terms:
    """The demo run loaded once on `engine`, translating lines as `mtkit translate --glossary` does, a glossary per
    line."""

    def __init__(self, run: Path, engine: str = "torch") -> None:
        from mtkit.engines.config import EngineConfig
        from mtkit.engines.factory import load_translator
        from mtkit.engines.plans import split_options

        self.translator = load_translator(run, EngineConfig(engine=engine))
        self.options = split_options(self.translator, split=False)  # the run's default term method

    def translate(
        self, lines: Sequence[str], glossaries: dict[int, dict[str, str]] | None = None, method: str = ""
    ) -> tuple[list[str], list[list[dict[str, Any]]], Counter[str], float, float]:
        """Outputs, each line's terms as mtkit reports them, how many lines each way took (mtkit's `method`), the
        seconds (lines prepared, translated, finished, again by the next way where a term is missing) and the
        model's share of them. `method` "": the run's default."""
        from mtkit.engines.plans import outputs_of, translate_whole_lines
        from mtkit.engines.streaming import CHUNK_LINES
        from mtkit.text.glossary import glossary_from_mapping
        from mtkit.text.line_plan import prepare_line

        glossaries = glossaries or {}
        options = dataclasses.replace(self.options, term_method=method or self.options.term_method)
        shared = {id(g): g for g in glossaries.values()}  # a glossary shared by lines, read once
        built = {key: glossary_from_mapping(g) for key, g in shared.items()}
        made = {n: dataclasses.replace(options, glossary=built[id(g)]) for n, g in glossaries.items()}
        start = time.perf_counter()
        outputs, reports, methods, model = [], [], Counter[str](), 0.0
        for first in range(0, len(lines), CHUNK_LINES):  # as translate_stream takes a file, chunk by chunk
            chunk = lines[first : first + CHUNK_LINES]
            prepared = [prepare_line(x, made.get(first + k, options)) for k, x in enumerate(chunk)]
            asked = time.perf_counter()
            prepared, results = translate_whole_lines(self.translator, list(chunk), prepared, first_lineno=first + 1)
            model += time.perf_counter() - asked
            for line, output in zip(prepared, outputs_of(self.translator.tokenizer, results), strict=True):
                text, terms = line.finish(output.text)
                outputs.append(text)
                reports.append(terms)
                methods[line.method or "none"] += 1
        return outputs, reports, methods, time.perf_counter() - start, model


def build_terms(src: list[str], refs: list[str], train_pairs: int) -> tuple[list[Term], Counter[tuple[str, str]]]:
    """Reference terms of the test set, and the one-to-one counts the speed test's glossaries are drawn from
    (frequent_pairs), from one eflomal alignment of the test set and `train_pairs` training pairs."""
    from mtkit.corpus.alignments import align

    train_src = [words(x) for x in harness_read_lines(MULTI30K / "train.en.gz", train_pairs)]
    train_tgt = [words(x) for x in harness_read_lines(MULTI30K / "train.de.gz", train_pairs)]
    test_src, test_ref = [words(x) for x in src], [words(x) for x in refs]
    start = time.perf_counter()
    links = align([" ".join(w) for w in test_src + train_src], [" ".join(w) for w in test_ref + train_tgt])
    print(f"aligned {len(links)} pairs in {time.perf_counter() - start:.1f}s", file=sys.stderr, flush=True)
    counts = one_to_one_counts(test_src + train_src, test_ref + train_tgt, links)
    return reference_terms(test_src, test_ref, links[: len(src)], counts), counts


def applied_row(name: str, terms: Sequence[Term], outputs: Sequence[str], reports: Sequence[list[dict]]) -> dict:
    """A glossary's row: exact-match accuracy both ways, and mtkit's own `applied` count against the measured."""
    return {
        "terms": name,
        "count": len(terms),
        "accuracy": accuracy(terms, outputs),
        "accuracy, any case": accuracy(terms, outputs, case=False),
        "found in source": sum(len(r) for r in reports),
        "applied (mtkit)": sum(t["applied"] for r in reports for t in r),
        "applied (measured)": sum(has_word(outputs[t.line], t.target) for t in terms),
    }


def method_counts(methods: Counter[str]) -> str:
    """How many sentences each way took, as "model 610, inline 350, placeholder 30" ("hint" for a hinted model)."""
    ways = ("model", "guided", "replace", "inline", "hint", "placeholder")
    return ", ".join(f"{name} {methods[name]}" for name in ways if methods[name])


def run(args: argparse.Namespace) -> None:
    demo = demo_run(args, "terms")
    count = args.lines or 1000
    src = [x.strip() for x in read_lines("en", count)]
    refs = [x.strip() for x in read_lines("de", count)]
    terms, counts = build_terms(src, refs, 5000 if args.small else 29000)
    randoms = random_terms(terms, refs, 100 if args.small else 200)
    from mtkit.text.glossary import TERM_METHODS

    engine_name = getattr(args, "engine", "torch")  # run.py has no --engine: mtkit's own
    engine = Terms(demo, engine_name)
    plain, *_ = engine.translate(src)
    random_lines = [t.line for t in randoms]
    renumbered = [dataclasses.replace(t, line=k) for k, t in enumerate(randoms)]
    without_random = [plain[n] for n in random_lines]
    random_src, owns = [src[n] for n in random_lines], own_words(terms, randoms)
    forced_of = functools.partial(
        forced_row,
        sources=random_src,
        plain=without_random,
        refs=[refs[n] for n in random_lines],
        owns=owns,
        targets=[t.target for t in randoms],
    )
    forced = [forced_of("random, no glossary", without_random)]
    rows = [
        applied_row("reference, no glossary", terms, plain, [[] for _ in plain])
        | {"BLEU": bleu(plain, refs)[0], "sentences": count, "invented digits": sum(map(invented_digits, src, plain))},
        applied_row("random, no glossary", renumbered, without_random, [[] for _ in randoms])
        | {"sentences": len(randoms)},
    ]
    outputs: dict[str, list[str]] = {}
    for method in TERM_METHODS:
        with_terms, term_reports, used, *_ = engine.translate(src, per_line(terms), method)
        with_random, random_reports, random_used, *_ = engine.translate(random_src, per_line(renumbered), method)
        outputs[method] = with_random
        forced.append(forced_of(f"random, glossary, {method}", with_random))
        rows += [
            applied_row(f"reference, glossary, {method}", terms, with_terms, term_reports)
            | {"BLEU": bleu(with_terms, refs)[0], "sentences": count, "ways": method_counts(used)}
            | {"invented digits": sum(map(invented_digits, src, with_terms))},
            applied_row(f"random, glossary, {method}", renumbered, with_random, random_reports)
            | {"sentences": len(randoms), "ways": method_counts(random_used)},
        ]
    timed = src[: 200 if args.small else 1000]
    everywhere, nowhere = frequent_pairs(counts, 1000), frequent_pairs(counts, 1000, timed)
    speed = speed_rows(engine, timed, everywhere, args.rounds, TERM_METHODS, nowhere, sampled_pairs(counts, 1000))
    report = {
        "run": str(demo.relative_to(Path.cwd())) if demo.is_relative_to(Path.cwd()) else demo.name,
        "engine": engine_name,
        "threads": os.environ.get("OMP_NUM_THREADS"),
        "speed": speed,
        "forced": forced,
        "terms": [dataclasses.asdict(t) for t in terms],
        "random_terms": [
            dataclasses.asdict(t) | {"own": own, "source text": x, "plain": p} | {m: o[k] for m, o in outputs.items()}
            for k, (t, own, x, p) in enumerate(zip(randoms, owns, random_src, without_random, strict=True))
        ],
    }
    result = write_results("terms" if engine_name == "torch" else f"terms-{engine_name}", report, rows)
    append_notes(
        result,
        [
            f"test_2016_flickr's first {count} lines, en->de, {demo.parent.name}/{demo.name}, the run's own search "
            f"on --engine {engine_name}; "
            f"{len(terms)} reference terms over {len({t.line for t in terms})} sentences, {len(randoms)} random terms.",
            "accuracy: the target term as a whole word in the output (any case: case-insensitive); applied (mtkit): "
            "the terms mtkit reports applied (its target as a whole word in the output); applied (measured): "
            "accuracy's count; ways: the sentences each way took (mtkit's `method`).",
            *(
                f"speed, {speed['lines']} lines, median of {speed['rounds']} rounds: no glossary {row['none s']} s, "
                f"a glossary of {speed['entries']} entries by {method} {row['glossary s']} s "
                f"({row['terms found']} terms found; {row['ways']}): {row['ratio']}x the speed without, of which "
                f"finding the terms and putting them in and back took {row['glossary own s']} s (the rest: the "
                f"model's); OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}."
                for method, row in speed["methods"].items()
            ),
            f"speed, the same lines: a glossary of {speed['absent']['entries']} entries none of which the lines hold, "
            f"by the run's default method ({speed['default method']}): {speed['absent']['glossary s']} s against "
            f"{speed['absent']['none s']} s without "
            f"({speed['absent']['terms found']} terms found), {speed['absent']['ratio']}x the speed without, of which "
            f"finding the terms took {speed['absent']['glossary own s']} s.",
            f"speed, the same lines: a glossary of {speed['sampled']['entries']} aligned words drawn at random, by the "
            f"run's default method: {speed['sampled']['glossary s']} s against {speed['sampled']['none s']} s without "
            f"({speed['sampled']['terms found']} terms "
            f"found; {speed['sampled']['ways']}), {speed['sampled']['ratio']}x the speed without.",
        ],
    )
    append_forced(result, forced)


def append_forced(result: Path, forced: list[dict[str, Any]]) -> None:
    """The forced-terms table of the random terms and what its columns count, at the end of the result's .md."""
    md = result.with_suffix(".md")
    notes = [
        "Each random term's target is a noun the model would not choose; its own word is the reference's word aligned "
        "to the source term. target once: outputs holding the target exactly once (whole word, any case); own word "
        "held: plain outputs holding the own word; own word replaced: of those, outputs holding the target and no "
        "longer the own word; appended: outputs whose first target stands after a sentence break the source lacks "
        "(a sentence of its own tacked on); invented digits: outputs holding a run of digits the source does not; "
        "swapped refs: the references with the own word replaced by the target (the first as a whole word, a capital "
        "at the sentence's start); refs: as they are.",
        "Term accuracy counts the word, not the sentence: compare a glossary row's chrF and BLEU against the swapped "
        "references with the no-glossary row's against the references as they are.",
    ]
    section = ["", "## Forced terms (random terms)", "", *table(forced), "", *(f"- {note}" for note in notes)]
    md.write_text(md.read_text() + "\n".join(section) + "\n")


def speed_rows(
    engine: Terms,
    lines: list[str],
    glossary: dict[str, str],
    rounds: int,
    methods: Sequence[str],
    absent: dict[str, str],
    sampled: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Seconds of `lines` without a glossary and with `glossary` for every line by each of `methods`, and with
    `absent` (a glossary none of whose terms the lines hold) and `sampled` (sampled_pairs) by the run's default
    method, `rounds` each: medians. Each glossary run comes right after a run without one, its own baseline (the
    machine's speed drifts over the minutes a round takes), and its ratio is that baseline's median over its own."""
    default = engine.options.term_method
    runs = {method: (glossary, method) for method in methods} | {"absent": (absent, default)}
    if sampled:
        runs["sampled"] = (sampled, default)
    none_s: dict[str, list[float]] = {name: [] for name in runs}
    with_s: dict[str, list[float]] = {name: [] for name in runs}
    model_s: dict[str, list[float]] = {name: [] for name in runs}
    found: dict[str, tuple[int, Counter[str]]] = {}
    for _ in range(rounds):
        for name, (entries, method) in runs.items():
            none_s[name].append(engine.translate(lines)[3])
            _, reports, used, seconds, model = engine.translate(
                lines, dict.fromkeys(range(len(lines)), entries), method
            )
            with_s[name].append(seconds)
            model_s[name].append(model)
            found[name] = sum(len(r) for r in reports), used
    none = statistics.median(s for name in runs for s in none_s[name])
    rows = {}
    for name in runs:
        with_ = statistics.median(with_s[name])
        outside = statistics.median(w - m for w, m in zip(with_s[name], model_s[name], strict=True))
        rows[name] = {
            "none s": round(statistics.median(none_s[name]), 2),
            "glossary s": round(with_, 2),
            "terms found": found[name][0],
            "ways": method_counts(found[name][1]),
            "glossary own s": round(outside, 2),  # finding terms, stand-ins in and out: all but the model's time
            "ratio": round(statistics.median(none_s[name]) / with_, 3),
        }
    return {
        "lines": len(lines),
        "entries": len(glossary),
        "rounds": rounds,
        "none s": round(none, 2),
        "default method": default,
        "methods": {method: rows[method] for method in methods},
        "absent": rows["absent"] | {"entries": len(absent)},
        **({"sampled": rows["sampled"] | {"entries": len(sampled)}} if sampled else {}),
    }


def main() -> None:
    """The scenario on either engine, as a script: run.py's own options for it, and --engine."""
    parser = argparse.ArgumentParser(description="terms on --engine torch or ctranslate2 (see the module docstring)")
    parser.add_argument("--demo-run", "--run", dest="demo_run", required=True, help="any trained en->de run directory")
    parser.add_argument("--engine", default="torch", choices=("torch", "ctranslate2"))
    parser.add_argument("--small", action="store_true", help="100 random terms, 200 timed lines, 5,000 aligned pairs")
    parser.add_argument("--rounds", type=int, help="alternating speed rounds (default: 1 with --small, else 3)")
    parser.add_argument("--lines", type=int, help="only the first N test lines (checks)")
    args = parser.parse_args()
    args.rounds = args.rounds or (1 if args.small else 3)
    run(args)


if __name__ == "__main__":
    main()
