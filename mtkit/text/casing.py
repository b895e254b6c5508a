"""Sentences in capitals or Title Case translated as the model knows them: the source's case is normalised before
translation and the translation given the source's case after it.

A model learns from text in sentence case: a sentence in capitals reaches it as rare pieces (its subword
vocabulary has few capitalised pieces), and the Multi30k demo model's BLEU on UPPER CASE sources fell from 35.5 to
near 0. Training with case modifiers (mtkit.corpus.modifiers) teaches a model some of it; this is the other half,
at no training cost: a sentence whose cased letters are (nearly) all capitals is lower-cased with its first
letter kept a capital, and one whose words all begin with a capital has the rest of its words lower-cased; the
translation is then put in capitals, or its words' first letters in capitals. Mixed text ("NASA sent a probe",
"I met John") is left as it is. Pure functions of strings.
"""

from __future__ import annotations

import re

UPPER, TITLE = "upper", "title"
_WORD = re.compile(r"\w[\w'’-]*")
MIN_LETTERS = 6  # "OK." or "USA" alone is an acronym, not a sentence in capitals


def case_of(sentence: str) -> str:
    """UPPER when (nearly) every cased letter is a capital, TITLE when every word of letters begins with one and
    some continue in small letters, else ""."""
    cased = [char for char in sentence if char.isupper() or char.islower()]
    if len(cased) < MIN_LETTERS:
        return ""
    if sum(char.isupper() for char in cased) >= 0.9 * len(cased):
        return UPPER
    words = [word for word in _WORD.findall(sentence) if word[0].isalpha()]
    if len(words) >= 4 and all(word[0].isupper() for word in words):
        return TITLE
    return ""


def normalised(sentence: str, case: str) -> str:
    """The sentence in sentence case, for a sentence of `case` (as it is for "")."""
    if case == UPPER:
        lowered = sentence.lower()
        return _first_upper(lowered)
    if case == TITLE:
        first = _WORD.search(sentence)
        start = first.end() if first else 0
        return sentence[:start] + _WORD.sub(lambda m: m.group().lower(), sentence[start:])
    return sentence


def restored(translation: str, case: str) -> str:
    """The translation given the source's `case`."""
    if case == UPPER:  # ß as the capital ẞ, not "SS": German's own capital since 2017, and it reads back as ß
        return translation.replace("ß", "ẞ").upper()
    if case == TITLE:
        return _WORD.sub(lambda m: m.group()[0].upper() + m.group()[1:], translation)
    return translation


def _first_upper(text: str) -> str:
    for index, char in enumerate(text):
        if char.isalpha():
            return text[:index] + char.upper() + text[index + 1 :]
    return text
