"""Texts translated sentence by sentence, with the guard that nothing is lost, for any caller and any engine.

`plan_translation` is a generator: it yields the list of sentences it needs translated, is sent their outputs
(Output: best text, log-probability, token count, the n-best's others), may ask once more for the pieces of
sentences whose translation the guard refused, and returns one TextTranslation per text. `run_plan` drives it with
a synchronous translate function (`mtkit translate`), `run_plan_async` with an awaitable one (`mtkit serve`), so
both batch every sentence of every text of a chunk or request together. Torch-free and engine-free. A line translated
whole, without the guard, goes by the line path (mtkit.text.line_plan).

The guard: a sentence with words whose translation comes back empty or runaway (mtkit.text.guard) has its loops
cut to one occurrence when that brings it within the length bound ("tamed"), else is translated again cut in two
at a clause or word boundary ("retried"); a piece whose translation is still empty is kept as written ("kept"),
one still runaway is tamed. Each such sentence is counted (Sentence.guard), never dropped. A long sentence whose
translation is short is translated in two pieces too, cut where a sentence may start (never at a name), and the
pieces taken ("retried") only where they give more tokens than the whole did at no lower mean log-prob per token
(Guard.better_halves): two sentences without a full stop between them, fused by the model, come back both.

Over 450 lines on purpose: the plan, the sentence's preparation (spans, glossary ways, casing, a memory's exact
match) and the guard's verdicts are one loop's steps that read each other's state; the parts with jobs of their own
already stand apart (guard, protect, glossary, casing, sentences; the line plan). It grew past 550 lines with the
"replace" way (a sentence's output edited where the model's attention puts its term) and a memory's fuzzy match
handed to the model, and past 600 with that match patched by the model's translations of what differs (one more
request after the loop; the patching itself is mtkit.memory.patching's), all steps of that loop. Its result types
(Output, Sentence, TextTranslation, Asked), which the engines, bulk jobs, documents and server import from here,
are the part with a job of its own that leaves next.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from mtkit.errors import check
from mtkit.text.casing import case_of, normalised, restored
from mtkit.text.glossary import (
    GUIDED,
    HINT,
    INLINE,
    MODEL,
    REPLACE,
    Glossary,
    checked_term_method,
    default_term_method,
    hinted,
    holds,
    replaced,
    term_ways,
    without_pieces,
)
from mtkit.text.guard import Guard
from mtkit.text.protect import (
    Masked,
    ProtectConfig,
    Span,
    copied_whole,
    mask,
    masked_like,
    protected_places,
    unmask,
)
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


class MemoryMatch(Protocol):
    """A translation memory's best segment for a sentence (mtkit.memory.matching.Match): its score (100: exact) and
    the translation that answers the sentence ("" for none: a fuzzy match the sentence differs from in more than
    placeables); `report()` is what a sentence's report shows of it."""

    score: int
    target: str  # the memory's target, as stored
    translation: str

    def report(self) -> dict[str, Any]: ...

    def asks(self) -> list[str]:
        """Texts the model is to translate so that the match's target can be patched (mtkit.memory.patching)."""
        ...

    def answer(self, output: str, translations: Mapping[str, Sequence[str]], fill: bool) -> str:
        """The sentence's translation from the model's `output` and asks()'s `translations` (`fill`: a match's target
        may stand for an output that departs from it, for review)."""
        ...


class MemoryLookup(Protocol):
    """A translation memory as the plan asks it (mtkit.memory.matching.MemoryIndex): the best match at or above
    `threshold`, or None."""

    def best(self, sentence: str, threshold: int) -> MemoryMatch | None: ...


@dataclass
class Output:
    """A model's answer for one input: its best text, that text's log-probability (eos included) and token count
    (eos excluded), and the texts of the rest of its n-best, best first; where the plan asked for it (Asked.align),
    the best text's word alignment: per word of `text.split()`, its attention over the words of the input as sent
    (None: not asked, or the engine could not give it)."""

    text: str
    logprob: float
    tokens: int
    others: list[str] = field(default_factory=list)
    alignment: list[list[float]] | None = None


@dataclass
class Sentence:
    """One source sentence (or line, unsplit) and what became of it."""

    source: str
    translation: str
    logprob: float | None = None  # of the translation, eos included; None: kept as written, no model output
    tokens: int = 0  # the translation's tokens the model scored, eos included
    guard: str = ""  # "": translated; "retried": in two pieces; "kept": a piece kept as written; "tamed": loops cut
    protected: int = 0  # spans kept as written (mtkit.text.protect); a sentence of them only is copied, never sent
    terms: list[dict[str, Any]] = field(default_factory=list)  # glossary terms: source, target, applied
    method: str = ""  # how its terms reached the model (mtkit.text.glossary: model, inline, placeholder); "": none
    memory: MemoryMatch | None = None  # the memory's best match: exact (the translation, never sent) or fuzzy

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


class Asked(list[str]):
    """Sentences a plan sends to the model, in order, with the glossary targets each translation must hold that
    the search is to place itself (`terms`, one tuple a sentence; empty for most) and the targets the "replace" way
    is to put in (`align`): an Output that lacks one of them is to carry its word alignment. A list of str to any
    caller that has no use for them. The line plan (mtkit.text.line_plan) also says which of its lines they are
    (`rows`), for a driver that gives each line something of its own (a forced prefix)."""

    def __init__(
        self,
        texts: list[str],
        terms: list[tuple[str, ...]] | None = None,
        rows: list[int] | None = None,
        align: list[tuple[str, ...]] | None = None,
    ) -> None:
        super().__init__(texts)
        self.terms = terms if terms is not None else [() for _ in texts]
        self.rows = rows if rows is not None else list(range(len(texts)))
        self.align = align if align is not None else [() for _ in texts]


def asked_terms(sentences: list[str]) -> list[tuple[str, ...]] | None:
    """The targets the search is to place for each of `sentences` (what a plan yielded), or None for none."""
    terms = sentences.terms if isinstance(sentences, Asked) else None
    return terms if terms and any(terms) else None


def asked_alignments(sentences: list[str]) -> list[tuple[str, ...]] | None:
    """The "replace" targets of each of `sentences` (what a plan yielded), or None for none: an output that lacks
    one of them (as a whole word, as the model writes: in sentence case) is to come back with its word alignment; a
    driver that cannot give one leaves Output.alignment None, and those terms take their next way."""
    align = sentences.align if isinstance(sentences, Asked) else None
    return align if align and any(align) else None


@dataclass(frozen=True)
class SplitOptions:
    """How texts are cut before translation: `split` sentences of `language` (else only line breaks cut), each
    piece at most `limit` tokens, checked by `guard`."""

    language: str
    split: bool = True
    limit: int = 256
    guard: Guard = field(default_factory=Guard)
    case: bool = True  # sentences in capitals or Title Case translated in sentence case (mtkit.text.casing)
    protect: ProtectConfig = field(default_factory=ProtectConfig)  # text kept as written (mtkit.text.protect)
    glossary: Glossary | None = None  # terms whose targets the translation takes (mtkit.text.glossary)
    # How the glossary is applied (mtkit.text.glossary.TERM_METHODS); "": the model's default, by its term_pieces
    # (mtkit.text.glossary.default_term_method), which the options hold from then on.
    term_method: str = ""
    # The model's reserved term-hint pieces (a run trained with term hints; mtkit.corpus.term_hints.TERM_PIECES): its
    # "inline" way is a hint, and no output holds a piece. (): a model without them.
    term_pieces: tuple[str, ...] = ()
    # Whether the engine's search places glossary targets itself (its `guides_terms`): the "guided" way's.
    term_guide: bool = False
    memory: MemoryLookup | None = None  # a memory: exact and repaired matches answer, fuzzy ones are reported
    memory_threshold: int = 75  # the lowest fuzzy score reported
    memory_fill: bool = False  # an unpatched fuzzy match's target may stand for the output, for review (catalogs)
    # The model's fuzzy-match piece (a run trained with fuzzy matches, mtkit.corpus.fuzzy_matches): a sentence's
    # fuzzy match's target goes to the model after it, as in training. "": a model without, matches only reported.
    fuzzy_piece: str = ""

    def __post_init__(self) -> None:
        check(len(self.term_pieces) in (0, 3), f"term_pieces: three pieces or none; got {self.term_pieces!r}")
        method = self.term_method or default_term_method(bool(self.term_pieces))
        object.__setattr__(self, "term_method", checked_term_method(method))
        # A reserved piece the text itself holds is kept as written: the model reads no hint the text did not mean.
        # Added once: dataclasses.replace runs this again on options that already have it.
        written = "|".join(re.escape(piece) for piece in self.term_pieces)
        if written and written not in self.protect.patterns:
            patterns = (*self.protect.patterns, written)
            object.__setattr__(self, "protect", ProtectConfig(self.protect.default, patterns))


def plan_translation(
    texts: list[str], options: SplitOptions, count: Count
) -> Generator[list[str], list[Output], list[TextTranslation]]:
    """Yields sentences to translate (each once) and is sent their Outputs, in order; returns each text's
    translation. `count` gives texts' lengths in the model's source tokens. A sentence goes to the model with its
    protected spans as stand-ins (mtkit.text.protect), which are put back after, and its glossary terms by the
    first of options.term_method's methods; one whose translation lacks a target goes again by the next method.
    One of protected text only is copied, never sent; one a translation memory holds (an exact match, or a fuzzy one
    repaired) is answered from it, never sent, and every other is told the memory's best fuzzy match."""
    segments = [_segment(text, options, count) for text in texts]
    sources = list(dict.fromkeys(s for segmented in segments for s in segmented.sources if wordy(s)))
    matches = _memory_matches(sources, options)
    current = {s: prepare(s, options) for s in sources}
    chosen: dict[str, tuple[Prepared, Sentence | None, Output | None, str]] = {}
    pending = [s for s in sources if s not in matches or not matches[s].translation]
    while pending:
        wanted = list(dict.fromkeys(current[s].masked.text for s in pending if not current[s].whole))
        guided = {current[s].masked.text: current[s].targets for s in pending if not current[s].whole}
        matched = {
            current[s].masked.text: masked_like(matches[s].target, current[s].masked, options.protect)
            for s in pending
            if s in matches and options.fuzzy_piece
        }
        aligned = {current[s].masked.text: current[s].replacing for s in pending if current[s].aligns}
        done, outputs, cases = yield from _plan_sentences(wanted, options, count, guided, matched, aligned)
        again = []
        for s in pending:
            ready = current[s]
            key = ready.masked.text
            if ready.aligns and not done[key].guard:  # its translation is the output aligned (not retried in pieces)
                ready = current[s] = ready.aligned(outputs[key].text, outputs[key].alignment, cases[key])
            later = None if ready.whole else ready.fallback(done[key].translation, cases[key])
            if ready.whole:
                chosen[s] = (ready, None, None, "")
            elif later is not None:
                current[s] = later
                again.append(s)
            else:
                chosen[s] = (ready, done[key], outputs[key], cases[key])
        pending = again
    # A fuzzy match's target patched where the model's translations of the parts that differ are found in it.
    fuzzy = {s: m for s, m in matches.items() if not m.translation and chosen.get(s, (None, None))[1] is not None}
    asks = list(dict.fromkeys(text for match in fuzzy.values() for text in match.asks()))
    said = {text: [output.text, *output.others] for text, output in zip(asks, (yield asks))} if asks else {}

    def sentence(source: str) -> Sentence:
        if not wordy(source):
            return Sentence(source, source)
        match = matches.get(source)
        if match is not None and match.translation:
            return Sentence(source, match.translation, memory=match)
        ready, inner, _, case = chosen[source]
        if inner is None:
            return Sentence(source, source, protected=max(len(ready.masked.spans), 1), memory=match)
        text, terms = ready.finish(inner.translation, case)
        answered = fuzzy[source].answer(text, said, options.memory_fill) if source in fuzzy else text
        if answered != text:  # the memory's, not the model's
            return Sentence(source, answered, protected=ready.protected, memory=match)
        return dataclasses.replace(
            inner,
            source=source,
            translation=text,
            protected=ready.protected,
            terms=terms,
            method=ready.method,
            memory=match,
        )

    def others(sentence: Sentence) -> list[str] | None:
        ready, _, output, case = chosen.get(sentence.source, (None, None, None, ""))
        if ready is None or output is None or sentence.guard:
            return None
        return [ready.finish(text, case)[0] for text in output.others]

    return [_assemble(segmented, [sentence(s) for s in segmented.sources], others) for segmented in segments]


def _memory_matches(sources: list[str], options: SplitOptions) -> dict[str, MemoryMatch]:
    """Each source's best match in options.memory at or above its threshold (none without a memory)."""
    if options.memory is None:
        return {}
    found = {s: options.memory.best(s, options.memory_threshold) for s in sources}
    return {s: match for s, match in found.items() if match is not None}


def _plan_sentences(
    wanted: list[str],
    options: SplitOptions,
    count: Count,
    guided: dict[str, tuple[str, ...]],
    matched: dict[str, str],
    aligned: dict[str, tuple[str, ...]],
) -> Generator[list[str], list[Output], tuple[dict[str, Sentence], dict[str, Output], dict[str, str]]]:
    """plan_translation's part over the sentences the model gets: each translated in its sentence case, with the
    targets `guided` gives it for the search to place and the fuzzy match's target `matched` gives it, and the
    guard's retries (whose pieces carry neither, their terms checked after as any), with the "replace" targets
    `aligned` gives it; returns each one's Sentence, its Output and its case."""
    cases = {s: case_of(s) if options.case else "" for s in wanted}
    plain = [normalised(s, cases[s]) for s in wanted]
    # As mtkit.corpus.fuzzy_matches.with_match writes a training source: text/ may not import corpus/.
    texts = [f"{text} {options.fuzzy_piece} {matched[s]}" if s in matched else text for s, text in zip(wanted, plain)]
    asked = Asked(texts, [guided.get(s, ()) for s in wanted], align=[aligned.get(s, ()) for s in wanted])
    outputs = dict(zip(wanted, _restored((yield asked) if wanted else [], [cases[s] for s in wanted])))
    sizes = dict(zip(wanted, count(plain))) if wanted else {}  # the guard weighs the sentence, not its match
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
    piece_cases = dict(cases)
    for s in refused:  # a piece keeps its sentence's case, which a short piece alone may not show
        piece_cases |= {p: cases[s] for p in (cuts[s] or ("", "", ""))[::2]}
    pieces = list(dict.fromkeys(p for s in refused if cuts[s] for p in (cuts[s][0], cuts[s][2]) if wordy(p)))
    asked = [normalised(p, piece_cases[p]) for p in pieces]
    more = dict(zip(pieces, _restored((yield asked) if pieces else [], [piece_cases[p] for p in pieces])))
    piece_sizes = dict(zip(pieces, count(asked))) if pieces else {}
    outputs |= more
    sizes |= piece_sizes

    def sentence(source: str) -> Sentence:
        if source in tamed:
            return _sentence(source, [outputs[source]], "tamed", tamed[source])
        if source not in cuts:
            return _sentence(source, [outputs[source]], "")
        if cuts[source] is None:
            return _repaired(source, outputs[source], sizes[source], options.guard)
        left, space, right = cuts[source]
        whole = outputs[source].logprob, outputs[source].tokens
        pieces = [(outputs[p].logprob, outputs[p].tokens) for p in (left, right) if wordy(p)]
        if verdicts[source] == "short" and not options.guard.better_halves(whole, pieces):
            return _sentence(source, [outputs[source]], "")  # the pieces are no better than the whole: it was short
        parts = [
            _repaired(p, outputs[p], sizes[p], options.guard) if wordy(p) else Sentence(p, p) for p in (left, right)
        ]
        guard = next((part.guard for part in parts if part.guard), "retried")
        scored = [outputs[p] for p, part in zip((left, right), parts) if part.logprob is not None]
        joined = parts[0].translation + (space or " ") + parts[1].translation
        return _sentence(source, scored, guard, joined) if scored else Sentence(source, joined, guard=guard)

    return {s: sentence(s) for s in wanted}, outputs, cases


@dataclass(frozen=True)
class Prepared:
    """A sentence as the model gets it: protected spans as stand-ins and each glossary term by its way (`masked`),
    or, `whole`, nothing but protected text, copied and never sent. `found`: the glossary's terms found (start,
    end, source, target); `ways[i]`, how found[i] reaches the model, one of `chain` (the term method's ways, in
    order); `places`, the protected spans; `case`, the sentence's, which inline targets take; `pieces`, the model's
    reserved term-hint pieces, which hints are written with and no output keeps; `edited`, a translation and that
    translation with the "replace" way's targets in place of their aligned words, which `finish` gives for it."""

    masked: Masked
    whole: bool = False
    found: tuple[tuple[int, int, str, str], ...] = ()
    ways: tuple[str, ...] = ()
    chain: tuple[str, ...] = ()
    places: tuple[tuple[int, int, Span], ...] = ()
    case: str = ""
    pieces: tuple[str, ...] = ()
    edited: tuple[str, str] = ()

    @property
    def protected(self) -> int:
        return sum(not span.term for span in self.masked.spans)

    @property
    def targets(self) -> tuple[str, ...]:
        """The targets the search is to place itself (the terms whose way is "guided"), as the glossary writes
        them: the model writes in sentence case, and the translation takes the source's case after."""
        return tuple(target for (_, _, _, target), way in zip(self.found, self.ways) if way == GUIDED)

    @property
    def method(self) -> str:
        """How the sentence's terms reached the model: the last of the chain any of them took ("" for none)."""
        return max(self.ways, key=self.chain.index, default="")

    @property
    def replacing(self) -> tuple[str, ...]:
        """The targets of the terms whose way is "replace", as the glossary writes them."""
        return tuple(target for (_, _, _, target), way in zip(self.found, self.ways) if way == REPLACE)

    @property
    def aligns(self) -> bool:
        """Whether the model's output for this sentence may need its word alignment (a "replace" term)."""
        return not self.whole and REPLACE in self.ways

    def aligned(self, text: str, alignment: list[list[float]] | None, case: str) -> Prepared:
        """This sentence with the "replace" terms' targets (in the source's `case`) put in place of the words of
        `text` (the model's output, in that case) their source words are aligned to; as it was without an alignment
        or where nothing changes."""
        if alignment is None:
            return self
        places = _term_words(self)
        terms = [
            (places[k], restored(target, case))
            for k, ((_, _, _, target), way) in enumerate(zip(self.found, self.ways))
            if way == REPLACE and places[k]
        ]
        edited = replaced(text, alignment, terms)
        return self if edited == text else dataclasses.replace(self, edited=(text, edited))

    def finish(self, translation: str, case: str) -> tuple[str, list[dict[str, Any]]]:
        """The translation (already in the source's `case`) with every span put back, and the terms' report: each
        term's target (in the source's case) is `applied` where the text holds it as a whole word."""
        if self.edited and translation == self.edited[0]:
            translation = self.edited[1]
        text = without_pieces(translation, self.pieces)
        if self.masked.spans:
            text = unmask(text, self.masked, lambda target: restored(target, case)).text
        terms = [
            {"source": source, "target": target, "applied": holds(text, restored(target, case))}
            for _, _, source, target in self.found
        ]
        return text, terms

    def fallback(self, translation: str, case: str) -> Prepared | None:
        """The sentence again where the translation lacks a term's target: each such term by the next way of the
        chain, each term the translation holds as it was; None where it holds every target or a missing one has no
        way left."""
        held = [term["applied"] for term in self.finish(translation, case)[1]]
        if all(held) or any(way == self.chain[-1] for way, ok in zip(self.ways, held) if not ok):
            return None
        ways = tuple(way if ok else self.chain[self.chain.index(way) + 1] for way, ok in zip(self.ways, held))
        return _by_ways(self, ways)


def _by_ways(prepared: Prepared, ways: tuple[str, ...]) -> Prepared:
    """`prepared`'s sentence with its terms by `ways`: left to the model ("model"), replaced by their targets in
    the sentence's case ("inline"), followed by them between the model's reserved pieces ("hint"), or by stand-ins
    ("placeholder"). An inline target or a hint is the model's to carry: nothing is put back for it."""
    spans = [
        (low, high, _term_span(prepared, low, high, term, target, way))
        for (low, high, term, target), way in zip(prepared.found, ways)
        if way not in (MODEL, GUIDED, REPLACE)
    ]
    masked = mask(prepared.masked.source, list(prepared.places) + spans)
    return dataclasses.replace(prepared, masked=masked, ways=ways, edited=())


def _term_words(prepared: Prepared) -> list[range]:
    """For each found term left as written ("model", "guided", "replace"), the indices of its words among the
    words of the text the model gets (`masked.text.split()`); an empty range for the others."""
    text, at, places = prepared.masked.text, 0, []
    for (low, high, _, _), way in zip(prepared.found, prepared.ways):
        written = prepared.masked.source[low:high]
        start = text.find(written, at) if way in (MODEL, GUIDED, REPLACE) else -1
        if start < 0:
            places.append(range(0))
            continue
        at = start + len(written)
        first = len(text[:start].split()) - (start > 0 and not text[start - 1].isspace())
        places.append(range(first, len(text[:at].split())))
    return places


def _term_span(prepared: Prepared, low: int, high: int, term: str, target: str, way: str) -> Span:
    """A found term's span for mask() by its way: its own text with the target after it ("hint"), the target in the
    sentence's case ("inline"), or a stand-in for the target ("placeholder")."""
    if way == HINT:
        written = prepared.masked.source[low:high]
        return Span(term, hinted(written, restored(target, prepared.case), prepared.pieces), term=True, inline=True)
    if way == INLINE:
        return Span(term, restored(target, prepared.case), term=True, inline=True)
    return Span(term, target, term=True)


def prepare(source: str, options: SplitOptions) -> Prepared:
    """A sentence as the model first gets it: protected spans (options.protect) as stand-ins, and glossary terms
    outside them (options.glossary) by the first way of options.term_method (Prepared.fallback gives the next)."""
    places = protected_places(source, options.protect)
    if copied_whole(source, options.protect):
        return Prepared(mask(source, places), whole=True)
    found = []
    if options.glossary is not None and len(options.glossary):
        found = options.glossary.find(source, [(low, high) for low, high, _ in places])
    if not found:
        return Prepared(mask(source, places), pieces=options.term_pieces)
    chain = term_ways(options.term_method, bool(options.term_pieces), options.term_guide)
    first = Prepared(
        Masked(source, source), found=tuple(found), chain=chain, places=tuple(places), pieces=options.term_pieces
    )
    first = dataclasses.replace(first, case=case_of(source) if options.case else "")
    return _by_ways(first, (chain[0],) * len(found))


def _restored(outputs: list[Output], cases: list[str]) -> list[Output]:
    """Outputs of case-normalised sentences given their sources' case back (mtkit.text.casing)."""
    return [
        Output(restored(o.text, case), o.logprob, o.tokens, [restored(t, case) for t in o.others], o.alignment)
        if case
        else o
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


def _assemble(
    segmented: Segmented, sentences: list[Sentence], others: Callable[[Sentence], list[str] | None]
) -> TextTranslation:
    text = segmented.join([s.translation for s in sentences])
    ranked = [others(s) for s in sentences]
    ranks = max((len(found) for found in ranked if found), default=0)
    alternatives = [
        segmented.join(
            [found[min(rank, len(found) - 1)] if found else s.translation for s, found in zip(sentences, ranked)]
        )
        for rank in range(ranks)
    ]
    return TextTranslation(text, sentences, alternatives)


def text_logprob(translation: TextTranslation) -> tuple[float, int]:
    """The log-probability of a text's translation and its scored tokens (eos included), over its sentences."""
    scored = [s for s in translation.sentences if s.logprob is not None]
    return sum(s.logprob for s in scored), sum(s.tokens for s in scored)


def guard_counts(translations: list[TextTranslation]) -> dict[str, int]:
    """How many sentences were translated, what the guard did to how many of them, and how many spans were kept as
    written (mtkit.text.protect)."""
    sentences = [s for translation in translations for s in translation.sentences]
    counts = {label: sum(s.guard == label for s in sentences) for label in GUARD_LABELS}
    return {"sentences": len(sentences)} | counts | {"protected": sum(s.protected for s in sentences)}


def term_counts(terms: list[dict[str, Any]]) -> dict[str, int]:
    """Glossary terms asked (`terms`) and those whose target is in the output (`terms_applied`)."""
    return {"terms": len(terms), "terms_applied": sum(bool(term["applied"]) for term in terms)}


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
