"""A fuzzy match's target repaired where its sentence differs from the match's source only in placeables: the
identifiers, option letters, numbers and all-capital names a translator copies as they are
("fr30_cgen_rebuild_tables", "-L", "inet6", "UID"), each found once, as written, in the target and swapped for the
sentence's own, as CAT tools substitute placeables before they offer a match; so is a name between quotes ("'define'
directive"), and a word capitalised at the start is the same word. Text of no words (placeholders, punctuation: "%s:
", "[%u]") is also taken out where the target holds it once (or begins or ends with it, where the source does), and
added at the start or the end, where a message's prefix or its trailing arguments stand ("%s: syntax error" from
"syntax error"), or in the middle beside the placeholders or punctuation it stands by ("%s[%u]: " from "%s: "). A
match that differs in anything else (a word the target translates, a word added) is not repaired: it goes to the
model, or is only reported.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher
from itertools import takewhile

# C's printf conversions, with glibc's length modifiers (%lu, %2lus, %Zd): what the memory protects as placeholders.
PRINTF = r"%(?:\d+\$)?[-+#0']*(?:\*|\d*)(?:\.(?:\*|\d+))?(?:hh|ll|[hlLqjztZ])?[diouxXeEfFgGcsp]"
TOKEN = re.compile(rf"{PRINTF}|\w+|[^\w\s]")  # a placeholder is one token ("%sUnknown": two)
# A token a translation keeps as written: with a digit or an underscore, one character, all capitals, or a capital
# inside a word (camelCase). Not a capitalised word ("Name", "Parent": English and German nouns can be spelt alike),
# nor a lower-case one ("open" is a word to translate as often as a command's name).
_PLACEABLE = re.compile(rf"{PRINTF}|\w*[\d_]\w*|.|[A-Z0-9]{{2,}}|[a-z]+[A-Z]\w*")
# What the match's source may have in the place instead, found as written in its target: lower case too (a German
# target holds an English lower-case word only as a name: a command, a file, a field).
_STORED = re.compile(rf"{_PLACEABLE.pattern}|[a-z]+")
_LETTER = re.compile(r"[^\W\d_]")
_QUOTES = "'`\"‘’“”„»«"  # a word between these is a name (a command, a function, a field), copied as written
_OPENING = ":=(["  # what leads to a message's argument
_FINAL = ".!?:"  # a target ending in one of these takes no trailing arguments after it, unless its source does too


def word_key(token: str) -> str:
    """What two sentences' tokens are compared by: a word capitalised at a sentence's start is the same word (not an
    option letter: -w and -W differ, nor a name in capitals)."""
    return token[:1].lower() + token[1:] if len(token) > 1 and token.isalpha() and token[1:].islower() else token


def _placeable(tokens: list[str], pattern: re.Pattern[str]) -> bool:
    return bool(tokens) and all(pattern.fullmatch(token) for token in tokens)


def repaired(sentence: str, source: str, target: str) -> str | None:
    """`target`, the translation of `source`, with the placeables in which `sentence` differs from `source` put in
    their place; None where the two differ in anything else, or a placeable is not in the target exactly once."""
    wanted = list(TOKEN.finditer(sentence))
    stored_at = list(TOKEN.finditer(source))
    stored = [m.group() for m in stored_at]
    written = list(TOKEN.finditer(target))
    words = [m.group() for m in written]
    edits: list[tuple[int, int, str]] = []
    keys = [word_key(m.group()) for m in wanted]
    matcher = SequenceMatcher(None, [word_key(token) for token in stored], keys, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if tag == "insert" and _symbolic(sentence[wanted[j1].start() : wanted[j2 - 1].end()]):
            edit = _added(sentence, wanted, j1, j2, stored, target, written, i1)
            if edit is None:
                return None
            edits.append(edit)
            continue
        if tag == "delete" and _symbolic(text := source[stored_at[i1].start() : stored_at[i2 - 1].end()]):
            edit = _cut(target, text, i1 == 0, i2 == len(stored))
            if edit is None:
                return None
            edits.append(edit)
            continue
        old, new = stored[i1:i2], [m.group() for m in wanted[j1:j2]]
        if tag == "insert" or not _placeable(old, _STORED) or (new and not _kept(sentence, wanted[j1:j2])):
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
    if not edits and sentence != source:
        return target  # the same words but for a capital letter (or the white space between them)
    if not edits or any(a[1] > b[0] for a, b in zip(places, places[1:])):
        return None  # nothing to repair, or two differences on one place of the target
    for low, high, text in sorted(edits, reverse=True):
        target = target[:low] + text + target[high:]
    return target


def _kept(sentence: str, tokens: list[re.Match[str]]) -> bool:
    """Whether the sentence's tokens are placeables, or a name between quotes (`'endef' directive`)."""
    if _placeable([m.group() for m in tokens], _PLACEABLE):
        return True
    low, high = tokens[0].start(), tokens[-1].end()
    return 0 < low and high < len(sentence) and sentence[low - 1] in _QUOTES and sentence[high] in _QUOTES


def _symbolic(text: str) -> bool:
    """Whether `text` holds no word: placeholders, numbers, punctuation only."""
    return _LETTER.search(re.sub(PRINTF, "", text)) is None


def _cut(target: str, text: str, first: bool, last: bool) -> tuple[int, int, str] | None:
    """`text` taken out of `target`, where it stands there once (or, for the source's first or `last` text, where
    the target begins or ends with it), with one of the spaces it stood between."""
    at = target.find(text)
    if at >= 0 and target.find(text, at + 1) >= 0:
        stripped = target.rstrip() if last else target.lstrip() if first else ""
        if last and stripped.endswith(text):
            at = len(stripped) - len(text)
        elif first and stripped.startswith(text):
            at = len(target) - len(stripped)
        else:
            return None
    if at < 0:
        return None
    high = at + len(text)
    if target[high : high + 1] == " " and (at == 0 or target[at - 1] == " "):
        high += 1
    elif last and target[at - 1 : at] == " " and not target[high:].strip():
        at -= 1
    if target[:at].rstrip()[-1:] in _OPENING and not target[high:].strip():
        return None  # "Schnittstelle: %s" -> "Schnittstelle: ": what led to the text would stand for nothing
    return at, high, ""


def _added(
    sentence: str,
    wanted: list[re.Match[str]],
    j1: int,
    j2: int,
    stored: list[str],
    target: str,
    written: list[re.Match[str]],
    i1: int,
) -> tuple[int, int, str] | None:
    """The sentence's added text of no words in the target: before its first word or after its last in place of the
    target's own white space there; in the middle, beside the placeholders or punctuation next to it in the source
    where the target holds them together once ("%s: " -> "%s[%u]: "); None where its place is not known."""
    if not written or not stored:
        return None
    if i1 == 0 and j1 == 0:
        return 0, written[0].start(), sentence[: wanted[j2].start()] if j2 < len(wanted) else sentence
    if i1 == len(stored) and j2 == len(wanted):
        last = written[-1].group()
        if last in _FINAL and last != stored[-1]:
            return None
        return written[-1].end(), len(target), sentence[wanted[j1 - 1].end() :]
    # The source's tokens of no words next to the place, up to two either side.
    before = list(takewhile(_symbolic, reversed(stored[max(0, i1 - 2) : i1])))[::-1]
    after = list(takewhile(_symbolic, stored[i1 : i1 + 2]))
    words = [m.group() for m in written]
    for left, right in ((before, after), (before, []), ([], after)):
        run = left + right
        found = [k for k in range(len(words) - len(run) + 1) if run and words[k : k + len(run)] == run]
        if len(found) != 1:
            continue
        if left:
            place = written[found[0] + len(left) - 1].end()
            return place, place, sentence[wanted[j1 - 1].end() : wanted[j2 - 1].end()]
        place = written[found[0]].start()
        return place, place, sentence[wanted[j1].start() : wanted[j2].start()]
    return None
