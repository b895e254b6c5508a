"""A translator seen by the text plans (mtkit.text.sentence_plan, mtkit.text.line_plan): its source language, input
limit and a command's or request's TranslateOptions as SplitOptions, its tokenizer as a token counter, its
hypotheses as Outputs; and both plans driven synchronously (what `mtkit translate` and the bulk jobs run; mtkit
serve drives the same plans on its worker). Imports no torch."""

from __future__ import annotations

import functools
import weakref
from typing import TYPE_CHECKING, Any

from mtkit.corpus.fuzzy_matches import fuzzy_piece
from mtkit.corpus.term_hints import term_pieces
from mtkit.engines.options import TranslateOptions
from mtkit.engines.output import decode, output_line
from mtkit.search.config import Hypothesis
from mtkit.text.glossary import holds
from mtkit.text.line_plan import Line, plan_lines
from mtkit.text.sentence_plan import (
    Asked,
    Output,
    SplitOptions,
    TextTranslation,
    asked_alignments,
    asked_terms,
    plan_translation,
    run_plan,
)
from mtkit.text.sentences import Count

if TYPE_CHECKING:
    from mtkit.engines.contract import Translating
    from mtkit.tokenizer import Tokenizer

DEFAULT_LANGUAGE = "en"  # sentencex's own fallback, for a model whose data names no source language
# A tokenizer's reserved pieces (term hints, fuzzy match), found once: each look walks the whole vocabulary (7 ms
# for 8,000 pieces), which every request's options would pay.
_RESERVED: weakref.WeakKeyDictionary[Any, tuple[tuple[str, ...], str]] = weakref.WeakKeyDictionary()


def sentence_limit(translator: Translating) -> int:
    """The longest sentence a model is given whole, in source tokens: the longest its training data kept
    (preprocess max_len, which old runs' manifests may lack), never over what its positions hold."""
    options = translator.info.get("manifest", {}).get("options", {})
    trained = options.get("max_len") or translator.max_source_tokens
    return max(1, min(int(trained), translator.max_source_tokens - 1))  # one position for a language code


def split_options(
    translator: Translating, language: str | None = None, split: bool = True, options: TranslateOptions | None = None
) -> SplitOptions:
    """Splitting for this model: `language` or its data's source language; `split` False cuts at line breaks only;
    `options`' casing round trip, protected text, glossary and term method (none when None); a model trained with
    term hints takes its glossary's inline terms as hints (its reserved pieces). A term method "": the model's
    default, its hints first where it has them (mtkit.text.glossary.default_term_method)."""
    options = options or TranslateOptions()
    source = language or translator.info.get("manifest", {}).get("source_lang") or DEFAULT_LANGUAGE
    reserved = reserved_pieces(translator.tokenizer)
    return SplitOptions(
        source.lower(),
        split,
        sentence_limit(translator),
        case=options.case,
        protect=options.protect,
        glossary=options.glossary,
        term_method=options.term_method,
        term_pieces=reserved[0],
        term_guide=translator.guides_terms,
        memory=options.memory,
        memory_threshold=options.memory_threshold,
        memory_fill=options.memory_fill,
        fuzzy_piece=reserved[1],
    )


def reserved_pieces(tokenizer: Any) -> tuple[tuple[str, ...], str]:
    """The tokenizer's term-hint pieces and fuzzy-match piece (mtkit.corpus), found once per tokenizer."""
    try:
        return _RESERVED[tokenizer]
    except KeyError:
        found = _RESERVED[tokenizer] = (term_pieces(tokenizer), fuzzy_piece(tokenizer))
        return found
    except TypeError:  # not weakly referable (a stand-in): found each time
        return term_pieces(tokenizer), fuzzy_piece(tokenizer)


def token_counter(tokenizer: Tokenizer) -> Count:
    """Texts' lengths in source tokens, as the engines encode them (stripped)."""
    return lambda texts: [len(ids) for ids in tokenizer.encode([text.strip() for text in texts])]


def outputs_of(tokenizer: Tokenizer, results: list[list[Hypothesis]]) -> list[Output]:
    """Each input's n-best as an Output: best text (one line), log-probability, tokens, the others' texts."""
    texts = iter(decode(tokenizer, [h.tokens for hyps in results for h in hyps]))
    outputs = []
    for hyps in results:
        found = [output_line(next(texts)) for _ in hyps]
        best = hyps[0] if hyps else Hypothesis([], 0.0, 0.0)
        outputs.append(Output(found[0] if found else "", best.logprob, len(best.tokens), found[1:]))
    return outputs


def translate_split(
    translator: Translating, texts: list[str], options: SplitOptions, strict: bool = False
) -> list[TextTranslation]:
    """Texts translated sentence by sentence, every sentence of them batched together, the guard applied."""

    def translate(sentences: list[str]) -> list[Output]:
        terms, align = asked_terms(sentences), aligns(sentences)
        hyps = translator.translate_hypotheses(sentences, strict=strict, terms=terms, align=align)
        return with_alignments(translator, sentences, hyps, outputs_of(translator.tokenizer, hyps))

    return run_plan(plan_translation(texts, options, token_counter(translator.tokenizer)), translate)


def translate_whole_lines(
    translator: Translating,
    sources: list[str],
    lines: list[Line] | None,
    strict: bool = False,
    prefixes: list[str] | None = None,
    first_lineno: int = 1,
) -> tuple[list[Line] | None, list[list[Hypothesis]]]:
    """`sources` translated whole by the line plan, `lines` their prepare_line: the lines as last asked, whose
    `finish` gives an output its case and spans back, and each line's n-best from its last round. `lines` None:
    the sources sent as they are, no plan."""
    if lines is None:
        return None, translator.translate_hypotheses(sources, first_lineno, strict, prefixes)
    results: list[list[Hypothesis]] = [[] for _ in sources]

    def translate(asked: Asked) -> list[Output]:
        forced = None if prefixes is None else [prefixes[i] for i in asked.rows]
        lineno = first_lineno if len(asked.rows) == len(sources) else 1  # a retry round names no input lines
        hyps = translator.translate_hypotheses(list(asked), lineno, strict, forced, asked_terms(asked), aligns(asked))
        for i, found in zip(asked.rows, hyps, strict=True):
            results[i] = found
        return with_alignments(translator, asked, hyps, outputs_of(translator.tokenizer, hyps))

    return run_plan(plan_lines(lines), translate), results  # type: ignore[arg-type]


def aligns(asked: list[str]) -> bool:
    """Whether the plan asks any of these texts' outputs for their alignment (a "replace" term among them)."""
    return any(asked_alignments(asked) or ())


def with_alignments(
    translator: Translating, asked: list[str], results: list[list[Hypothesis]], outputs: list[Output]
) -> list[Output]:
    """`outputs` of the `asked` texts, those that lack a target the plan is to put in by the "replace" way
    (Asked.align) given their best hypothesis's word alignment from the model's attention: the attention the search
    kept (mtkit's engine, asked to `align`), else one pass over those pairs only, so a sentence without such a term,
    or whose output holds its targets already, costs nothing."""
    align = asked_alignments(asked) or []
    rows = [
        k
        for k, targets in enumerate(align)
        if targets and results[k] and results[k][0].tokens and not all(holds(outputs[k].text, t) for t in targets)
    ]
    if not rows:
        return outputs
    src = translator.encode_lines([asked[k] for k in rows], 1, False, lambda _: None)  # warned once already
    tgt = [results[k][0].tokens for k in rows]
    # The search's own, where it kept them over these ids (a served multilingual model's began with a language code).
    kept = [results[k][0].attention for k in rows]
    missing = [i for i, weights in enumerate(kept) if not weights or len(weights[0]) != len(src[i])]
    if missing:
        passed = translator.attention_ids([src[i] for i in missing], [tgt[i] for i in missing])
        for i, weights in zip(missing, passed):
            kept[i] = weights
    for k, ids, tokens, weights in zip(rows, src, tgt, kept):
        outputs[k].alignment = word_alignment(translator.tokenizer, asked[k], outputs[k].text, ids, tokens, weights)
    return outputs


def word_alignment(
    tokenizer: Tokenizer, source: str, output: str, src: list[int], tgt: list[int], attention: list[list[float]]
) -> list[list[float]] | None:
    """Piece-to-piece attention (a row per target id, a column per source id) as words: per word of
    `output.split()`, its pieces' rows averaged, over the words of `source.split()`, each its pieces' columns summed
    (a language code leading the source left out). None where the pieces do not make those words."""
    pieces, target_pieces, codes = _pieces(tokenizer)
    skip = 1 if src and src[0] in codes else 0
    src_words = _piece_words([pieces[i] for i in src[skip:]])
    out_words = _piece_words([target_pieces[i] for i in tgt])
    n_src, n_out = len(source.split()), len(output.split())
    if not src_words or src_words[-1] + 1 != n_src or not out_words or out_words[-1] + 1 != n_out:
        return None
    if len(attention) < len(tgt):
        return None
    matrix = [[0.0] * n_src for _ in range(n_out)]
    counts = [0] * n_out
    for piece, row in enumerate(attention[: len(tgt)]):
        word = out_words[piece]
        counts[word] += 1
        for column, weight in enumerate(row[skip : skip + len(src_words)]):
            matrix[word][src_words[column]] += weight
    return [[weight / counts[word] for weight in row] for word, row in enumerate(matrix)]


def _piece_words(pieces: list[str]) -> list[int]:
    """Each sentencepiece piece's word, counted from 0: a piece that begins with the word mark begins a word."""
    words, word = [], -1
    for piece in pieces:
        if word < 0 or piece.startswith("\u2581"):
            word += 1
        words.append(word)
    return words


@functools.lru_cache(maxsize=8)  # per model: its vocabularies are read once
def _pieces(tokenizer: Tokenizer) -> tuple[list[str], list[str], frozenset[int]]:
    """The source and target pieces of a model's tokenizer and its language codes' ids."""
    codes = frozenset(code for code in map(tokenizer.language_id, tokenizer.language_codes()) if code is not None)
    return tokenizer.pieces(), tokenizer.target_pieces(), codes
