"""A fuzzy match's target repaired where its sentence differs from the match's source only in placeables: the
identifiers, option letters, numbers and all-capital names a translator copies as they are ("fr30_cgen_rebuild_tables",
"-L", "inet6", "UID"), each found once, as written, in the target and swapped for the sentence's own, as CAT tools
substitute placeables before they offer a match. A match that differs in anything else (a word the target
translates, a word added) is not repaired: it goes to the model, or is only reported.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher

TOKEN = re.compile(r"\w+|[^\w\s]")
# A token a translation keeps as written: with a digit or an underscore, one character, all capitals, or a capital
# inside a word (camelCase). Not a capitalised word ("Name", "Parent": English and German nouns can be spelt alike),
# nor a lower-case one ("open" is a word to translate as often as a command's name).
_PLACEABLE = re.compile(r"\w*[\d_]\w*|.|[A-Z0-9]{2,}|[a-z]+[A-Z]\w*")
# What the match's source may have in the place instead, found as written in its target: lower case too (a German
# target holds an English lower-case word only as a name: a command, a file, a field).
_STORED = re.compile(rf"{_PLACEABLE.pattern}|[a-z]+")


def _placeable(tokens: list[str], pattern: re.Pattern[str]) -> bool:
    return bool(tokens) and all(pattern.fullmatch(token) for token in tokens)


def repaired(sentence: str, source: str, target: str) -> str | None:
    """`target`, the translation of `source`, with the placeables in which `sentence` differs from `source` put in
    their place; None where the two differ in anything else, or a placeable is not in the target exactly once."""
    wanted = list(TOKEN.finditer(sentence))
    stored = [m.group() for m in TOKEN.finditer(source)]
    written = list(TOKEN.finditer(target))
    words = [m.group() for m in written]
    edits: list[tuple[int, int, str]] = []
    matcher = SequenceMatcher(None, stored, [m.group() for m in wanted], autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        old, new = stored[i1:i2], [m.group() for m in wanted[j1:j2]]
        if tag == "insert" or not _placeable(old, _STORED) or (new and not _placeable(new, _PLACEABLE)):
            return None
        found = [k for k in range(len(words) - len(old) + 1) if words[k : k + len(old)] == old]
        if len(found) != 1:
            return None
        low, high = written[found[0]].start(), written[found[0] + len(old) - 1].end()
        if tag == "replace":
            edits.append((low, high, sentence[wanted[j1].start() : wanted[j2 - 1].end()]))
            continue
        before, after = target[low - 1 : low] or " ", target[high : high + 1] or " "
        if not before.isspace() or not (after.isspace() or after in ".,;:!?"):
            return None  # a deleted placeable glued to a word ("shadow-Gruppe") would leave half of it
        edits.append((low, high + 1, "") if after.isspace() else (low - 1 if low else low, high, ""))
    places = sorted(edits)
    if not edits or any(a[1] > b[0] for a, b in zip(places, places[1:])):
        return None  # nothing to repair, or two differences on one place of the target
    for low, high, text in sorted(edits, reverse=True):
        target = target[:low] + text + target[high:]
    return target
