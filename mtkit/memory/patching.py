"""A fuzzy match's target patched by machine translation of the parts in which its sentence differs from the match's
source (Ortega, Sánchez-Martínez & Forcada 2016, fuzzy-match repair with black-box MT): per difference, the match
source's words there (alone, then with a word of context either side) are translated, that translation is found
once in the target, and the translation of the sentence's words there takes its place. A short phrase out of
context has more than one translation, so the model is asked the match's side as written, capitalised and in lower
case, and each of its n best translations of them is looked for (the sentence's side takes the best). A
difference whose translation the target does not hold leaves the match unpatched.

Where no patch is found, `answer` gives the model's own output (it was given the match) or, where the caller fills
entries for review, the match's target as mtkit.text.review offers it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from difflib import SequenceMatcher

from mtkit.memory.repair import TOKEN
from mtkit.text.review import offered

CONTEXT = 1  # words of context either side a difference is also tried with

# Per difference, (the match source's words, the sentence's words) with 0 .. CONTEXT words of context.
Difference = tuple[tuple[str, str], ...]


def differences(sentence: str, source: str) -> tuple[Difference, ...] | None:
    """The parts in which `sentence` differs from `source` (a fuzzy match's), as sub-segment pairs to translate;
    None where a difference has no words either side to place it by (an insertion at an end)."""
    wanted, stored = list(TOKEN.finditer(sentence)), list(TOKEN.finditer(source))
    matcher = SequenceMatcher(None, [m.group() for m in stored], [m.group() for m in wanted], autojunk=False)
    found = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        pairs = []
        for c in range(CONTEXT + 1):
            low_i, high_i, low_j, high_j = i1 - c, i2 + c, j1 - c, j2 + c
            if low_i < 0 or low_j < 0 or high_i > len(stored) or high_j > len(wanted):
                break
            if low_i < high_i and low_j < high_j:
                old = source[stored[low_i].start() : stored[high_i - 1].end()]
                pairs.append((old, sentence[wanted[low_j].start() : wanted[high_j - 1].end()]))
        if not pairs:
            return None
        found.append(tuple(pairs))
    return tuple(found)


def asked(found: tuple[Difference, ...]) -> list[str]:
    """The sub-segments the model is asked to translate for `found`, each once."""
    return list(dict.fromkeys(text for pairs in found for old, new in pairs for text in (*_forms(old), new)))


def patched(target: str, found: tuple[Difference, ...], translations: Mapping[str, Sequence[str]]) -> str | None:
    """`target` with every difference's translation in place (asked's `translations`: each text's, best first);
    None where one is not found once in it, or two fall on one place."""
    edits = []
    for pairs in found:
        edit = next((e for old, new in pairs if (e := _edit(target, old, new, translations)) is not None), None)
        if edit is None:
            return None
        edits.append(edit)
    edits.sort()
    if not edits or any(a[1] > b[0] for a, b in zip(edits, edits[1:])):
        return None
    for low, high, text in reversed(edits):
        target = target[:low] + text + target[high:]
    return target


def answer(output: str, target: str, fill: bool) -> str:
    """An unpatched fuzzy match's sentence: the model's `output`, or with `fill` as mtkit.text.review offers."""
    return offered(output, target) if fill else output


def _edit(target: str, old: str, new: str, translations: Mapping[str, Sequence[str]]) -> tuple[int, int, str] | None:
    """Where a translation of `old` (any of its forms) stands once in `target`, and that of `new` to put there."""
    written = _phrase(next(iter(translations.get(new, ())), ""))
    if not written:
        return None
    for text in (text for form in _forms(old) for text in translations.get(form, ())):
        found = _once(target, _phrase(text))
        if found is not None:
            if found.group()[:1].isupper() and written[:1].islower():
                written = written[:1].upper() + written[1:]
            return found.start(), found.end(), written
    return None


def _forms(text: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys((text, text[:1].upper() + text[1:], text.lower())))


def _phrase(text: str) -> str:
    return text.strip().rstrip(".")


def _once(target: str, phrase: str) -> re.Match[str] | None:
    """`phrase` as whole words in `target`, any case, where it stands there exactly once."""
    if not phrase:
        return None
    found = list(re.finditer(r"(?<!\w)" + re.escape(phrase) + r"(?!\w)", target, re.IGNORECASE))
    return found[0] if len(found) == 1 else None
