"""What one command or request may set over a model's own, typed end to end: the search's fields (beam, length
penalty, n-best, ...: mtkit.search.config.SearchOverrides) and what the text plans take (glossary, protected
patterns, term method, casing, a translation memory). `mtkit translate`, `translate-file`, the bulk jobs and each
API of `mtkit serve` parse their options into one TranslateOptions; mtkit.engines.plans.split_options gives it a
model's own limits.
Plain data: imports no engine and no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mtkit.search.config import SearchOverrides
from mtkit.text.glossary import Glossary
from mtkit.text.protect import ProtectConfig
from mtkit.text.sentence_plan import MemoryLookup


@dataclass(frozen=True)
class TranslateOptions:
    """One translation's options. `search`: the TranslateConfig fields set over the model's (a command's at the
    model load, a request's per batch); `glossary`: terms whose targets the translation takes; `protect`: text kept
    as written beside the defaults; `term_method`: how the glossary is applied ("": the model's default);
    `case`: sentences in capitals or Title Case translated in sentence case and given their case back; `memory`: a
    translation memory's index (mtkit.memory.matching.MemoryIndex), whose exact matches answer a sentence and whose
    best fuzzy match at or above `memory_threshold` each sentence reports (and patches, mtkit.memory.patching)."""

    search: SearchOverrides = field(default_factory=SearchOverrides)
    glossary: Glossary | None = None
    protect: ProtectConfig = field(default_factory=ProtectConfig)
    term_method: str = ""
    case: bool = True
    memory: MemoryLookup | None = None
    memory_threshold: int = 75
    memory_fill: bool = False  # an unpatched fuzzy match's target may stand for the output (entries for review)
