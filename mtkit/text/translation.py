"""Texts translated sentence by sentence, with the guard that nothing is lost, for any caller and any engine.

`plan_translation` is a generator: it yields the list of sentences it needs translated, is sent their outputs
(Output: best text, log-probability, token count, the n-best's others), may ask once more for the pieces of
sentences whose translation the guard refused, and returns one TextTranslation per text. `run_plan` drives it with
a synchronous translate function (`mtkit translate`), `run_plan_async` with an awaitable one (`mtkit serve`), so
both batch every sentence of every text of a chunk or request together. Torch-free and engine-free.

The guard: a sentence with words whose translation comes back empty or runaway (mtkit.text.guard) has its loops
cut to one occurrence when that brings it within the length bound ("tamed"), else is translated again cut in two
at a clause or word boundary ("retried"); a piece whose translation is still empty is kept as written ("kept"),
one still runaway is tamed. Each such sentence is counted (Sentence.guard), never dropped. A long sentence whose
translation is short is translated in two pieces too, and the pieces taken ("retried") only where they give more
tokens than the whole did: two sentences without a full stop between them, fused by the model, come back both.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, field

from mtkit.text.casing import case_of, normalised, restored
from mtkit.text.guard import Guard
from mtkit.text.sentences import (
    Count,
    Segmented,
    cut_segmented,
    fused_halves,
    halves,
    split_lines,
    split_sentences,
    wordy,
)

GUARD_LABELS = ("retried", "kept", "tamed")  # what the guard did to a sentence ("" : nothing)


@dataclass
class Output:
    """A model's answer for one input: its best text, that text's log-probability (eos included) and token count
    (eos excluded), and the texts of the rest of its n-best, best first."""

    text: str
    logprob: float
    tokens: int
    others: list[str] = field(default_factory=list)


@dataclass
class Sentence:
    """One source sentence (or line, unsplit) and what became of it."""

    source: str
    translation: str
    logprob: float | None = None  # of the translation, eos included; None: kept as written, no model output
    tokens: int = 0  # the translation's tokens the model scored, eos included
    guard: str = ""  # "": translated; "retried": in two pieces; "kept": a piece kept as written; "tamed": loops cut

    @property
    def confidence(self) -> float | None:
        """Mean log-prob per token, as the search scores it: a ranking signal within one model, not a probability."""
        return None if self.logprob is None else self.logprob / self.tokens

    @property
    def word_confidence(self) -> float | None:
        """Log-prob per word of the translation (Bergamot's quality score)."""
        return None if self.logprob is None else self.logprob / max(len(self.translation.split()), 1)


@dataclass
class TextTranslation:
    text: str  # the translated text, white space and line breaks as the source had them
    sentences: list[Sentence]
    alternatives: list[str]  # the text again with each sentence's next-best translations, rank by rank


@dataclass(frozen=True)
class SplitOptions:
    """How texts are cut before translation: `split` sentences of `language` (else only line breaks cut), each
    piece at most `limit` tokens, checked by `guard`."""

    language: str
    split: bool = True
    limit: int = 256
    guard: Guard = field(default_factory=Guard)
    case: bool = True  # sentences in capitals or Title Case translated in sentence case (mtkit.text.casing)


def plan_translation(
    texts: list[str], options: SplitOptions, count: Count
) -> Generator[list[str], list[Output], list[TextTranslation]]:
    """Yields sentences to translate (each once) and is sent their Outputs, in order; returns each text's
    translation. `count` gives texts' lengths in the model's source tokens."""
    segments = [_segment(text, options, count) for text in texts]
    wanted = list(dict.fromkeys(s for segmented in segments for s in segmented.sources if wordy(s)))
    cases = {s: case_of(s) if options.case else "" for s in wanted}
    asked = [normalised(s, cases[s]) for s in wanted]
    outputs = dict(zip(wanted, _restored((yield asked) if wanted else [], [cases[s] for s in wanted])))
    sizes = dict(zip(wanted, count(asked))) if wanted else {}
    verdicts = {s: _verdict(options.guard, s, outputs[s], sizes[s]) for s in wanted}
    refused = [s for s in wanted if verdicts[s]]
    unlooped = {s: options.guard.unlooped(outputs[s].text) for s in refused if verdicts[s] == "runaway"}
    tamed = {  # a loop cut to one occurrence is the translation the model meant ("weit weit weit weit" -> "weit")
        s: text
        for s, text in unlooped.items()
        if text is not None and len(text.split()) <= options.guard.limit(len(s.split()))
    }
    refused = [s for s in refused if s not in tamed]
    cuts = {s: fused_halves(s) if verdicts[s] == "short" else halves(s) for s in refused}
    for s in refused:  # a piece keeps its sentence's case, which a short piece alone may not show
        cases |= {p: cases[s] for p in (cuts[s] or ("", "", ""))[::2]}
    pieces = list(dict.fromkeys(p for s in refused if cuts[s] for p in (cuts[s][0], cuts[s][2]) if wordy(p)))
    asked = [normalised(p, cases[p]) for p in pieces]
    more = dict(zip(pieces, _restored((yield asked) if pieces else [], [cases[p] for p in pieces])))
    piece_sizes = dict(zip(pieces, count(asked))) if pieces else {}
    outputs |= more
    sizes |= piece_sizes

    def sentence(source: str) -> Sentence:
        if not wordy(source):
            return Sentence(source, source)
        if source in tamed:
            return _sentence(source, [outputs[source]], "tamed", tamed[source])
        if source not in cuts:
            return _sentence(source, [outputs[source]], "")
        if cuts[source] is None:
            return _repaired(source, outputs[source], sizes[source], options.guard)
        left, space, right = cuts[source]
        if (
            verdicts[source] == "short"
            and sum(outputs[p].tokens for p in (left, right) if wordy(p)) <= outputs[source].tokens
        ):
            return _sentence(source, [outputs[source]], "")  # the pieces say no more than the whole: it was short
        parts = [
            _repaired(p, outputs[p], sizes[p], options.guard) if wordy(p) else Sentence(p, p) for p in (left, right)
        ]
        guard = next((part.guard for part in parts if part.guard), "retried")
        scored = [outputs[p] for p, part in zip((left, right), parts) if part.logprob is not None]
        joined = parts[0].translation + (space or " ") + parts[1].translation
        return _sentence(source, scored, guard, joined) if scored else Sentence(source, joined, guard=guard)

    return [_assemble(segmented, [sentence(s) for s in segmented.sources], outputs) for segmented in segments]


def _restored(outputs: list[Output], cases: list[str]) -> list[Output]:
    """Outputs of case-normalised sentences given their sources' case back (mtkit.text.casing)."""
    return [
        Output(restored(o.text, case), o.logprob, o.tokens, [restored(t, case) for t in o.others]) if case else o
        for o, case in zip(outputs, cases)
    ]


def _segment(text: str, options: SplitOptions, count: Count) -> Segmented:
    segmented = split_sentences(text, options.language) if options.split else split_lines(text)
    return cut_segmented(segmented, count, options.limit)


def _verdict(guard: Guard, source: str, output: Output, source_tokens: int) -> str:
    """The guard's verdict, where a loop the source itself has ("ha ha ha ha") is not the model's."""
    verdict = guard.verdict(output.text, source_tokens, output.tokens)
    if verdict == "runaway" and output.tokens <= guard.limit(source_tokens) and guard.loop(source.split()):
        return ""
    return verdict


def _repaired(source: str, output: Output, source_tokens: int, guard: Guard) -> Sentence:
    """A translation the guard has the last word on: empty is the source kept as written, runaway is tamed, short
    is taken as it is."""
    verdict = _verdict(guard, source, output, source_tokens)
    if verdict == "empty":
        return Sentence(source, source, guard="kept")
    if verdict == "runaway":
        return _sentence(source, [output], "tamed", guard.tame(output.text, len(source.split())))
    return _sentence(source, [output], "")


def _sentence(source: str, outputs: list[Output], guard: str, text: str | None = None) -> Sentence:
    """A sentence scored by the outputs its translation came from (two for one retried in pieces)."""
    translation = outputs[0].text if text is None else text
    logprob = sum(output.logprob for output in outputs)
    return Sentence(source, translation, logprob, sum(output.tokens + 1 for output in outputs), guard)


def _assemble(segmented: Segmented, sentences: list[Sentence], outputs: dict[str, Output]) -> TextTranslation:
    text = segmented.join([s.translation for s in sentences])
    ranks = max((len(outputs[s.source].others) for s in sentences if s.source in outputs and not s.guard), default=0)
    alternatives = [
        segmented.join(
            [
                _other(outputs[s.source], rank) if s.source in outputs and not s.guard else s.translation
                for s in sentences
            ]
        )
        for rank in range(ranks)
    ]
    return TextTranslation(text, sentences, alternatives)


def _other(output: Output, rank: int) -> str:
    """The n-best's text of `rank` (0: the second best), or its last one where it has fewer."""
    return output.others[min(rank, len(output.others) - 1)] if output.others else output.text


def text_logprob(translation: TextTranslation) -> tuple[float, int]:
    """The log-probability of a text's translation and its scored tokens (eos included), over its sentences."""
    scored = [s for s in translation.sentences if s.logprob is not None]
    return sum(s.logprob for s in scored), sum(s.tokens for s in scored)


def guard_counts(translations: list[TextTranslation]) -> dict[str, int]:
    """How many sentences were translated, and what the guard did to how many of them."""
    sentences = [s for translation in translations for s in translation.sentences]
    return {"sentences": len(sentences)} | {label: sum(s.guard == label for s in sentences) for label in GUARD_LABELS}


def run_plan(
    plan: Generator[list[str], list[Output], list[TextTranslation]], translate: Callable[[list[str]], list[Output]]
) -> list[TextTranslation]:
    """The plan driven by a synchronous translate (a list of texts to their Outputs, in order)."""
    try:
        wanted = next(plan)
        while True:
            wanted = plan.send(translate(wanted))
    except StopIteration as done:
        return done.value


async def run_plan_async(
    plan: Generator[list[str], list[Output], list[TextTranslation]],
    translate: Callable[[list[str]], Awaitable[list[Output]]],
) -> list[TextTranslation]:
    """The plan driven by an awaitable translate."""
    try:
        wanted = next(plan)
        while True:
            wanted = plan.send(await translate(wanted))
    except StopIteration as done:
        return done.value
