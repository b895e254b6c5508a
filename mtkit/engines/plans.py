"""A translator seen by mtkit.text.sentence_plan: its source language and input limit as SplitOptions, its tokenizer
as a token counter, its hypotheses as Outputs, and texts translated sentence by sentence synchronously (what
`mtkit translate --split-sentences` runs; mtkit serve drives the same plan on its worker). Imports no torch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mtkit.corpus.term_hints import term_pieces
from mtkit.engines.output import decode, output_line
from mtkit.search.config import Hypothesis
from mtkit.text.glossary import Glossary
from mtkit.text.protect import ProtectConfig
from mtkit.text.sentence_plan import Output, SplitOptions, TextTranslation, asked_terms, plan_translation, run_plan
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
    translator: Translating,
    language: str | None = None,
    split: bool = True,
    case: bool = True,
    protect: ProtectConfig | None = None,
    glossary: Glossary | None = None,
    term_method: str = "",
) -> SplitOptions:
    """Splitting for this model: `language` or its data's source language; `split` False cuts at line breaks only;
    the casing round trip, protected text and glossary as SplitOptions takes them; a model trained with term hints
    takes its glossary's inline terms as hints (its reserved pieces). `term_method` "": the model's default, its
    hints first where it has them (mtkit.text.glossary.default_term_method)."""
    source = language or translator.info.get("manifest", {}).get("source_lang") or DEFAULT_LANGUAGE
    return SplitOptions(
        source.lower(),
        split,
        sentence_limit(translator),
        case=case,
        protect=protect or ProtectConfig(),
        glossary=glossary,
        term_method=term_method,
        term_pieces=term_pieces(translator.tokenizer),
        term_guide=translator.guides_terms,
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
