"""The interface both translation engines offer (Translating) and the source/prefix encoding both use.

Below both engines: it imports neither of them, nor torch. The factory that picks an engine by name is
mtkit.engines, above them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol

from mtkit.decoding import Hypothesis, TranslateConfig
from mtkit.console import warn
from mtkit.errors import check

if TYPE_CHECKING:
    from mtkit.tokenizer import Tokenizer

class Translating(Protocol):
    """What `mtkit translate` (mtkit.stream) and `mtkit serve` use of a translator, whichever engine decodes.

    mtkit.translate.Translator (torch) and mtkit.ct2engine.CT2Translator (CTranslate2) both offer it; both are
    dataclasses, so `dataclasses.replace(translator, cfg=...)` gives the same model under other search options.
    """

    tokenizer: Tokenizer
    cfg: TranslateConfig
    device: Any  # where it decodes: "cpu"/"cuda" (ctranslate2) or a torch.device; str() of either names it
    info: dict[str, Any]  # what the model says of itself (checkpoint, configs, manifest; engine and dtype)

    def describe(self) -> dict[str, Any]:
        """{"arch": preset or None, "parameters": count or None, "dtype": the precision it runs in}."""
        ...

    @property
    def max_source_tokens(self) -> int:
        """Longest source in tokens (eos excluded); longer lines are truncated or, when strict, refused."""
        ...

    @property
    def workers(self) -> int:
        """Batches decoded at once."""
        ...

    def translate(self, lines: list[str]) -> list[str]:
        """One output per input line, in order; empty lines give empty outputs."""
        ...

    def translate_hypotheses(
        self, lines: list[str], first_lineno: int = 1, strict: bool = False, prefixes: list[str] | None = None,
    ) -> list[list[Hypothesis]]:
        """n-best hypotheses per line, in input order; `prefixes` (one per line, "" for none): text each
        translation must begin with."""
        ...

    def encode_lines(
        self, lines: list[str], first_lineno: int = 1, strict: bool = False, on_warning: Callable[[str], None] = ...,
    ) -> list[list[int]]:
        """Source ids per line, truncated to max_source_tokens with a warning (refused when strict)."""
        ...

    def score_ids(self, src: list[list[int]], tgt: list[list[int]]) -> list[list[float]]:
        """Teacher-forced natural-log probability of each target id, then of the end of sentence, per pair (none
        empty or over max_source_tokens): what the search would add up for that hypothesis."""
        ...

    def search_ids(self, ids: list[list[int]], prefixes: list[list[int]] | None = None) -> list[list[Hypothesis]]:
        """n-best hypotheses per id sequence (none for an empty one), in input order; `prefixes` (target ids per
        sequence, [] for none) are forced at the start of each translation."""
        ...


def encode_sources(
    tokenizer: Tokenizer, lines: list[str], longest: int, first_lineno: int = 1, strict: bool = False,
    on_warning: Callable[[str], None] | None = None,
) -> list[list[int]]:
    """Source ids per line, stripped as preprocess strips the training text (a whitespace-only line translates to
    nothing); a line over `longest` tokens is truncated with a warning, or refused when strict.

    `on_warning` receives each warning (mtkit.serve collects them per request instead of printing them).
    """
    ids = tokenizer.encode([line.strip() for line in lines])
    for offset, tokens in enumerate(ids):
        if len(tokens) > longest:
            where = f"line {first_lineno + offset}"
            check(not strict, f"{where}: {len(tokens)} tokens, over the model's {longest} (--strict)")
            (on_warning or warn)(f"{where}: {len(tokens)} tokens, truncated to {longest}")
            ids[offset] = tokens[:longest]
    return ids


def encode_prefixes(tokenizer: Tokenizer, prefixes: list[str] | None) -> list[list[int]] | None:
    """Target ids each translation must begin with ([] for an empty prefix), or None when there are no prefixes."""
    if prefixes is None:
        return None
    return tokenizer.encode_target([prefix.strip() for prefix in prefixes])


def language_pair(translator: Translating) -> tuple[str, str] | None:
    """The (source, target) codes a model's data manifest names, lower-cased; None when it names none."""
    manifest = translator.info.get("manifest", {})
    source, target = manifest.get("source_lang"), manifest.get("target_lang")
    return (source.lower(), target.lower()) if source and target else None
