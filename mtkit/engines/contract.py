"""The interface both translation engines offer (Translating: what each does its own way, Decoding, and the methods
both share, written here once as functions), the source/prefix encoding both use, and the length-sorted batches both
(and the server and the bulk jobs) translate in.

Below both engines: it imports neither of them, nor torch. The factory that picks an engine by name is
mtkit.engines.factory, above them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from mtkit.console import warn
from mtkit.corpus.language_pairs import language_pairs
from mtkit.engines.output import best_lines
from mtkit.errors import check
from mtkit.search.config import Hypothesis, TranslateConfig

if TYPE_CHECKING:
    from mtkit.tokenizer import Tokenizer

# Token ids of a batch, one list a sequence (sources, forced prefixes); and each sequence's glossary terms, each term
# the target ids it must hold.
Ids = list[list[int]]
TermIds = list[list[list[int]]]


class Decoding(Protocol):
    """What each engine does its own way: mtkit.engines.torch_engine.TorchTranslator (torch) and
    mtkit.engines.ct2.CT2Translator (CTranslate2) both offer it; both are dataclasses, so
    `dataclasses.replace(translator, cfg=...)` gives the same model under other search options."""

    tokenizer: Tokenizer
    cfg: TranslateConfig
    device: Any  # where it decodes: "cpu"/"cuda" (ctranslate2) or a torch.device; str() of either names it
    info: dict[str, Any]  # what the model says of itself (checkpoint, configs, manifest; engine and dtype)
    guides_terms: bool  # whether search_ids places glossary terms itself (mtkit's search does, CTranslate2's not)

    def describe(self) -> dict[str, Any]:
        """{"arch": preset or None, "parameters": count or None, "dtype": the precision it runs in}."""
        ...

    @property
    def max_source_tokens(self) -> int:
        """Longest source in tokens (eos excluded); longer lines are truncated or, when strict, refused."""
        ...

    def score_ids(self, src: list[list[int]], tgt: list[list[int]]) -> list[list[float]]:
        """Teacher-forced natural-log probability of each target id, then of the end of sentence, per pair (none
        empty or over max_source_tokens): what the search would add up for that hypothesis."""
        ...

    def search_ids(
        self, ids: Ids, prefixes: Ids | None = None, terms: TermIds | None = None, align: bool = False
    ) -> list[list[Hypothesis]]:
        """n-best hypotheses per id sequence (none for an empty one), in input order; `prefixes` (target ids per
        sequence, [] for none) are forced at the start of each translation; `terms` (per sequence, the target ids of
        each glossary term it must hold) guide the search where `guides_terms`, and are ignored elsewhere; `align`:
        each hypothesis keeps its tokens' attention over the source (Hypothesis.attention, as attention_ids gives
        it) where the engine's search can keep it, and comes without elsewhere."""
        ...

    def attention_ids(self, src: Ids, tgt: Ids) -> list[list[list[float]]]:
        """Per (source, target) pair, the target's attention over the source: one row per target id, one column
        per source id (mtkit.engines.plans reads it as word alignments for a glossary's "replace" way)."""
        ...


def translate_lines(translator: Decoding, lines: list[str]) -> list[str]:
    """One output per input line, in order; empty lines give empty outputs. Both engines' `translate`."""
    return best_lines(translator.tokenizer, line_hypotheses(translator, lines))


def line_hypotheses(
    translator: Decoding,
    lines: list[str],
    first_lineno: int = 1,
    strict: bool = False,
    prefixes: list[str] | None = None,
    terms: list[tuple[str, ...]] | None = None,
    align: bool = False,
) -> list[list[Hypothesis]]:
    """n-best hypotheses per line (an empty list for an empty or whitespace-only line), in input order; `prefixes`
    (one per line, "" for none): text each translation must begin with; `terms` (one tuple per line): glossary
    targets the search places itself where the engine `guides_terms`; `align`: hypotheses with their attention
    where the engine's search keeps it (search_ids). Both engines' `translate_hypotheses`."""
    ids = encode_lines(translator, lines, first_lineno, strict)
    return translator.search_ids(
        ids, encode_prefixes(translator.tokenizer, prefixes), encode_terms(translator.tokenizer, terms), align
    )


def encode_terms(tokenizer: Tokenizer, terms: list[tuple[str, ...]] | None) -> TermIds | None:
    """Each line's glossary targets as target ids (each encoded alone, so it begins a word), or None when no line
    has one."""
    if not terms or not any(terms):
        return None
    flat = tokenizer.encode_target([target for line in terms for target in line])
    places = iter(flat)
    return [[next(places) for _ in line] for line in terms]


def encode_lines(
    translator: Decoding,
    lines: list[str],
    first_lineno: int = 1,
    strict: bool = False,
    on_warning: Callable[[str], None] = warn,
) -> list[list[int]]:
    """Source ids per line (after cfg.target_lang's code on a multilingual model: for CTranslate2 its piece >>xx<<
    starts the source it reads); a line over the model's length is truncated with a warning, or refused when
    strict. `on_warning` receives each warning (mtkit.serve.app collects them per request instead of printing
    them). Both engines' `encode_lines`."""
    return encode_sources(
        translator.tokenizer,
        lines,
        translator.max_source_tokens,
        first_lineno,
        strict,
        on_warning,
        translator.cfg.target_lang,
    )


def decode_workers(translator: Decoding) -> int:
    """Batches decoded at once (CTranslate2's inter_threads): cfg.workers on CPU, 1 elsewhere. Both engines'
    `workers`."""
    return translator.cfg.workers if str(translator.device).split(":")[0] == "cpu" else 1


class Translating(Decoding, Protocol):
    """What `mtkit translate` (mtkit.engines.streaming), `mtkit serve` and the bulk jobs use of a translator,
    whichever engine decodes: an engine's own (Decoding) and what both engines share, the functions above, bound
    here as the protocol's members, which both engines inherit (each subclasses Translating), written once."""

    translate = translate_lines
    translate_hypotheses = line_hypotheses
    encode_lines = encode_lines
    workers = property(decode_workers)


def encode_sources(
    tokenizer: Tokenizer,
    lines: list[str],
    longest: int,
    first_lineno: int = 1,
    strict: bool = False,
    on_warning: Callable[[str], None] | None = None,
    target_lang: str | None = None,
) -> list[list[int]]:
    """Source ids per line, stripped as preprocess strips the training text (a whitespace-only line translates to
    nothing), after the target language's code on a multilingual model (source_codes); a line over `longest` tokens
    is truncated with a warning, or refused when strict.

    `on_warning` receives each warning (mtkit.serve.app collects them per request instead of printing them).
    """
    codes, texts = source_codes(tokenizer, lines, target_lang, first_lineno)
    return encode_texts(tokenizer, codes, texts, longest, first_lineno, strict, on_warning)


def source_codes(
    tokenizer: Tokenizer,
    lines: list[str],
    target_lang: str | None,
    first_lineno: int = 1,
    option: str = "--target-lang",
) -> tuple[list[int | None], list[str]]:
    """Each line's target-language code id (None on a model without codes) and its text, stripped.

    A line that begins with a code of the model (opus-mt's `>>fr<< text`) keeps its own; the others take
    `target_lang`'s, or the only code of a model that has one. A non-empty line without a code on a model of several
    is a one-line error naming `option` (`target` in mtkit serve) and the languages.
    """
    texts = [line.strip() for line in lines]
    known = tokenizer.language_codes()
    if not known:
        return [None] * len(texts), texts
    default = target_code(tokenizer, target_lang, option)
    codes: list[int | None] = []
    for offset, text in enumerate(texts):
        end = text.find("<<") if text.startswith(">>") else -1
        own = tokenizer.language_id(text[2:end]) if end > 2 else None
        if own is not None:
            text = texts[offset] = text[end + 2 :].lstrip()
        check(
            own is not None or default is not None or not text,
            f"line {first_lineno + offset}: {option}: this model translates into {', '.join(known)}; choose one, "
            f"or begin the line with its code, such as >>{known[0]}<<",
        )
        codes.append(own if own is not None else default)
    return codes, texts


def target_code(tokenizer: Tokenizer, target_lang: str | None, option: str = "--target-lang") -> int | None:
    """The id of `target_lang`'s code (the only code when None and the model has one); None when the model has no
    codes or several and none was chosen. A code the model lacks is a one-line error naming the ones it has."""
    known = tokenizer.language_codes()
    if not known:
        return None
    if target_lang is None:
        return tokenizer.language_id(known[0]) if len(known) == 1 else None
    code = tokenizer.language_id(target_lang)
    check(code is not None, f"{option} {target_lang}: this model translates into {', '.join(known)}; choose one")
    return code


def encode_texts(
    tokenizer: Tokenizer,
    codes: list[int | None],
    texts: list[str],
    longest: int,
    first_lineno: int = 1,
    strict: bool = False,
    on_warning: Callable[[str], None] | None = None,
) -> list[list[int]]:
    """Ids of stripped texts, each after its code (none for an empty text), truncated to `longest` as
    encode_sources says."""
    ids = tokenizer.encode(texts)
    for offset, (code, tokens) in enumerate(zip(codes, ids)):
        if code is not None and tokens:
            tokens = ids[offset] = [code, *tokens]
        if len(tokens) > longest:
            where = f"line {first_lineno + offset}"
            check(not strict, f"{where}: {len(tokens)} tokens, over the model's {longest} (--strict)")
            (on_warning or warn)(f"{where}: {len(tokens)} tokens, truncated to {longest}")
            ids[offset] = tokens[:longest]
    return ids


def check_target_lang(tokenizer: Tokenizer, target_lang: str | None, manifest: dict[str, Any]) -> None:
    """At load: --target-lang names a code of a multilingual model or, on a model without codes, the one target
    language its data names (so one command line serves both kinds); anything else is a one-line error."""
    if target_lang is None:
        return
    if tokenizer.language_codes():
        target_code(tokenizer, target_lang)
        return
    targets = sorted({target for _, target in language_pairs(tokenizer, manifest)})
    into = f"it translates into {', '.join(targets)} only" if targets else "its data names no target language"
    check(
        target_lang.lower() in targets, f"--target-lang {target_lang}: this model has no >>xx<< language codes; {into}"
    )


def encode_prefixes(tokenizer: Tokenizer, prefixes: list[str] | None) -> Ids | None:
    """Target ids each translation must begin with ([] for an empty prefix), or None when there are no prefixes."""
    if prefixes is None:
        return None
    return tokenizer.encode_target([prefix.strip() for prefix in prefixes])


def language_pair(translator: Translating) -> tuple[str, str] | None:
    """The (source, target) codes a model's data manifest names, lower-cased; None when it names none."""
    manifest = translator.info.get("manifest", {})
    source, target = manifest.get("source_lang"), manifest.get("target_lang")
    return (source.lower(), target.lower()) if source and target else None


def length_batches(lengths: list[int], batch_tokens: int) -> list[list[int]]:
    """Translation batches: non-empty inputs' indices, by length, grouped so n * (longest + 1) <= batch_tokens.

    Plain Python (mtkit.corpus.batching, the training sampler, needs numpy: 15 MiB more at start-up).

    A sentence longer than the budget still gets a batch of its own.
    """
    order = sorted((i for i, n in enumerate(lengths) if n > 0), key=lambda i: (lengths[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    for index in order:
        width = lengths[index] + 1
        if current and (len(current) + 1) * width > batch_tokens:
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches
