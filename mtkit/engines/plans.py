"""A translator seen by the text plans (mtkit.text.sentence_plan, mtkit.text.line_plan): its source language, input
limit and a command's or request's TranslateOptions as SplitOptions, its tokenizer as a token counter, its
hypotheses as Outputs; and both plans driven synchronously (what `mtkit translate` and the bulk jobs run; mtkit
serve drives the same plans on its worker). Imports no torch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mtkit.corpus.fuzzy_matches import fuzzy_piece
from mtkit.corpus.term_hints import term_pieces
from mtkit.engines.options import TranslateOptions
from mtkit.engines.output import decode, output_line
from mtkit.search.config import Hypothesis
from mtkit.text.line_plan import Line, plan_lines
from mtkit.text.sentence_plan import (
    Asked,
    Output,
    SplitOptions,
    TextTranslation,
    asked_terms,
    plan_translation,
    run_plan,
)
from mtkit.text.sentences import Count

if TYPE_CHECKING:
    from mtkit.engines.contract import Translating
    from mtkit.tokenizer import Tokenizer

DEFAULT_LANGUAGE = "en"  # sentencex's own fallback, for a model whose data names no source language


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
    return SplitOptions(
        source.lower(),
        split,
        sentence_limit(translator),
        case=options.case,
        protect=options.protect,
        glossary=options.glossary,
        term_method=options.term_method,
        term_pieces=term_pieces(translator.tokenizer),
        term_guide=translator.guides_terms,
        memory=options.memory,
        memory_threshold=options.memory_threshold,
        fuzzy_piece=fuzzy_piece(translator.tokenizer),
    )


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
        terms = asked_terms(sentences)
        return outputs_of(translator.tokenizer, translator.translate_hypotheses(sentences, strict=strict, terms=terms))

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
        hyps = translator.translate_hypotheses(list(asked), lineno, strict, forced, asked_terms(asked))
        for i, found in zip(asked.rows, hyps, strict=True):
            results[i] = found
        return outputs_of(translator.tokenizer, hyps)

    return run_plan(plan_lines(lines), translate), results  # type: ignore[arg-type]
