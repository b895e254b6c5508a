"""A translation memory's entries cut into the pieces a catalog's string is sent as (mtkit.documents.ui_strings:
sentences, a help line's description apart from its option column, a table's cells), each paired with the piece of
the entry's target at the same place where both sides cut into as many: fragments the index matches as segments of
their own, so that a sentence of a longer entry ("Recognize double assist FPU instructions." of objdump's help line
"  fpuda           Recognize double assist FPU instructions.") finds its translation, as CAT tools match
sub-segments. An entry that is one piece, or whose sides cut differently, gives none.
"""

from __future__ import annotations

import re

from mtkit.documents.ui_strings import sentences_of

# What a text must hold to cut into more than itself: a line break, a tab, a run of spaces inside it, or a sentence
# end followed by more. Most of a memory's entries hold none and are never split (an import of millions of pairs).
_MAY_CUT = re.compile(r"\n|\t|\S {2,}\S|[.!?:;] +\S")
_SPACE = re.compile(r"\s+")
FALLBACK_LANGUAGE = "en"  # the splitter's rules where a memory names no language


def may_cut(source: str) -> bool:
    """Whether an entry's source may cut into fragments (the few worth the splitter's time)."""
    return _MAY_CUT.search(source.strip()) is not None


def fragments_of(source: str, target: str, languages: tuple[str | None, str | None]) -> list[tuple[str, str]]:
    """The entry's (source piece, target piece) pairs, or none."""
    if not may_cut(source):
        return []
    ours = sentences_of(source, languages[0] or FALLBACK_LANGUAGE)
    theirs = sentences_of(target, languages[1] or FALLBACK_LANGUAGE)
    if not ours or len(ours) != len(theirs):
        return []
    if len(ours) == 1 and _SPACE.sub(" ", ours[0]).strip() == _SPACE.sub(" ", source).strip():
        return []  # the entry itself
    return list(zip(ours, theirs))
