"""The built-in corpus filters of `mtkit preprocess`: a pair whose source equals its target, a side with letters
outside the scripts of its language, a side that reads as the pair's other language (mtkit.language_id).
Functions of lists of lines that return masks, and PairFilters, which applies the chosen ones in order and counts
what each drops. No torch, no tokenizing; which split is filtered is mtkit.corpus.preprocess's decision.
"""

from __future__ import annotations

import bisect
import functools
import re
import sys
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from mtkit.console import warn
from mtkit.corpus.config import CleaningConfig
from mtkit.errors import check
from mtkit.language_id import NAMES, LanguageDetector

# Drop reasons in the order they are tried (cheapest first, so the detector reads only what the others kept).
FILTER_REASONS = ("same_text", "unexpected_script", "wrong_language")
# A side is dropped when its pair's other language is at least this many times as likely as its own (p < 1/3). On
# Multi30k train (2026-11-25) the lowest own-language probability of a clean side was 0.41 ("Eine Broadway-Show beim
# Finale."); put on the other side, 57,997 of its 58,000 sides scored 0.25 at most (the others: two "@@", without
# features, 0.5, and that line 0.59).
LANGUAGE_MARGIN = 2.0

_LATIN = (
    "af an az br bs ca cs cy da de en eo es et eu fi fo fr fy ga gd gl ha hr ht hu id ig is it jv la lb lg ln lt "
    "lv mg ms mt nl nn no oc om pl pt qu ro rw se sk sl sn so sq st sv sw tk tl tr uz vi vo wa xh yo zu"
).split()
# ISO 639-1 code -> the scripts its letters are written in. Latin letters are accepted in every language besides
# these: names, acronyms and units (iPhone, COVID-19, km) appear in Russian, Greek or Chinese text too; a whole side
# in English there is the language filter's to find.
SCRIPTS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(_LATIN, ("Latin",)),
    **dict.fromkeys(("ba", "be", "bg", "kk", "ky", "mk", "mn", "ru", "sr", "tg", "tt", "uk"), ("Cyrillic",)),
    **dict.fromkeys(("ar", "fa", "ps", "ug", "ur"), ("Arabic",)),
    **dict.fromkeys(("hi", "mr", "ne", "sa"), ("Devanagari",)),
    **dict.fromkeys(("as", "bn"), ("Bengali",)),
    "am": ("Ethiopic",),
    "dz": ("Tibetan",),
    "el": ("Greek",),
    "gu": ("Gujarati",),
    "he": ("Hebrew",),
    "hy": ("Armenian",),
    "ja": ("Han", "Hiragana", "Katakana"),
    "ka": ("Georgian",),
    "km": ("Khmer",),
    "kn": ("Kannada",),
    "ko": ("Hangul", "Han"),
    "ku": ("Arabic",),
    "lo": ("Lao",),
    "ml": ("Malayalam",),
    "my": ("Myanmar",),
    "or": ("Oriya",),
    "pa": ("Gurmukhi",),
    "si": ("Sinhala",),
    "ta": ("Tamil",),
    "te": ("Telugu",),
    "th": ("Thai",),
    "zh": ("Han", "Bopomofo"),
    "bo": ("Tibetan",),
    "dv": ("Thaana",),
    "sd": ("Arabic",),
    "yi": ("Hebrew",),
}
# The first word of the Unicode names of a script's letters (after FULLWIDTH or HALFWIDTH); by default its name in
# capitals ("CYRILLIC SMALL LETTER A").
_NAME_WORDS = {"Han": ("CJK", "IDEOGRAPHIC")}
# Letters of no one language, never counted: ordinal indicators and the micro sign of Latin-1, the Letterlike Symbols
# (ℓ, K, Å) and the mathematical alphanumerics. Modifier letters (category Lm: the Ukrainian apostrophe ʼ,
# the Japanese long-vowel mark ー) are not checked at all.
_COMMON = [(0xAA, 0xAA), (0xB5, 0xB5), (0xBA, 0xBA), (0x2100, 0x214F), (0x1D400, 0x1D7FF)]


def same_text(src: Sequence[str], tgt: Sequence[str]) -> np.ndarray:
    """True where a pair's sides are equal once case and runs of whitespace are ignored (an untranslated copy)."""
    return np.fromiter((_normal(s) == _normal(t) for s, t in zip(src, tgt)), dtype=bool, count=len(src))


def _normal(text: str) -> str:
    return " ".join(text.split()).casefold()


def scripts_ok(texts: Sequence[str], language: str) -> np.ndarray:
    """True where every letter of a text is of `language`'s scripts or Latin; digits, punctuation, symbols and emoji
    are never letters. Raises UserError for a language missing from SCRIPTS."""
    unexpected = unexpected_letters(language)
    # ASCII holds no letter but Latin ones: most lines of most corpora never reach the pattern.
    return np.fromiter(
        (text.isascii() or _no_unexpected(unexpected, text) for text in texts), dtype=bool, count=len(texts)
    )


@dataclass(frozen=True)
class _Unexpected:
    """The letters one language does not expect: a character class of those below U+10000, which re matches with a
    bitmap, and the ranges above it, looked up only for the few characters there (mostly emoji, not letters): as
    ranges in the class they would be tried one by one for every character of every line, 30x slower."""

    pattern: re.Pattern[str]  # the basic plane's unexpected letters, and any character above it
    astral_firsts: list[int]
    astral_lasts: list[int]


def _no_unexpected(unexpected: _Unexpected, text: str) -> bool:
    for match in unexpected.pattern.finditer(text):
        code_point = ord(match[0])
        if code_point <= 0xFFFF:
            return False
        where = bisect.bisect_right(unexpected.astral_firsts, code_point) - 1
        if where >= 0 and code_point <= unexpected.astral_lasts[where]:
            return False
    return True


@functools.cache
def unexpected_letters(language: str) -> _Unexpected:
    """The letters of neither `language`'s scripts nor Latin."""
    check(
        language in SCRIPTS,
        f"the script filter does not know language {language!r} (it knows "
        f"{', '.join(sorted(SCRIPTS))}); turn it off: --no-filter-scripts, or filter_scripts = false in [preprocess]",
    )
    allowed = {"Latin", *SCRIPTS[language]}
    ranges = [(first, last) for first, last, script in _letter_runs() if script not in allowed]
    basic = "".join(f"{_escape(first)}-{_escape(last)}" for first, last in ranges if last <= 0xFFFF)
    astral = [(first, last) for first, last in ranges if last > 0xFFFF]
    pattern = re.compile(f"[{basic}{_escape(0x10000)}-{_escape(sys.maxunicode)}]")
    return _Unexpected(pattern, [first for first, _ in astral], [last for _, last in astral])


def _escape(code_point: int) -> str:
    return f"\\U{code_point:08x}"


@functools.cache
def _letter_runs() -> tuple[tuple[int, int, str], ...]:
    """Every letter Unicode has (categories Lu, Ll, Lt, Lo; Python's unicodedata) as runs of consecutive code points
    of one script: a name of SCRIPTS' tables, or "?" for the scripts no language here is written in. About 0.2 s,
    once per process (forked workers inherit it)."""
    scripts = sorted({script for language in SCRIPTS.values() for script in language} | {"Latin"})
    script_of_word = {word: script for script in scripts for word in _NAME_WORDS.get(script, (script.upper(),))}
    runs: list[tuple[int, int, str]] = []
    common = iter(_COMMON + [(sys.maxunicode + 1, sys.maxunicode + 1)])
    common_first, common_last = next(common)
    for code_point in range(sys.maxunicode + 1):
        if code_point > common_last:
            common_first, common_last = next(common)
        char = chr(code_point)
        if unicodedata.category(char) not in ("Lu", "Ll", "Lt", "Lo") or common_first <= code_point <= common_last:
            continue
        name = unicodedata.name(char, "").removeprefix("FULLWIDTH ").removeprefix("HALFWIDTH ")
        script = script_of_word.get(name.partition(" ")[0], "?")
        if runs and runs[-1][1] == code_point - 1 and runs[-1][2] == script:
            runs[-1] = (runs[-1][0], code_point, script)
        else:
            runs.append((code_point, code_point, script))
    return tuple(runs)


def language_ok(detector: LanguageDetector, texts: Sequence[str], language: str) -> np.ndarray:
    """True unless the detector, restricted to a pair's two languages, finds the other one at least LANGUAGE_MARGIN
    times as likely as `language` (one of its two)."""
    assert len(detector.languages) == 2 and language in detector.languages, detector.languages
    own = detector.probabilities(texts)[:, detector.languages.index(language)]
    return (1.0 - own) < LANGUAGE_MARGIN * own


@functools.cache
def _detector(languages: tuple[str, str]) -> LanguageDetector:
    """One detector per language pair and process: loading the model takes about 0.4 s."""
    return LanguageDetector(languages)


@dataclass(frozen=True)
class PairFilters:
    """The filters a training corpus is cleaned by, ready to run (patterns compiled, detector loaded)."""

    languages: tuple[str, str]  # source, target
    cleaning: CleaningConfig  # which filters are on: the corpus's, less a script filter its languages turned off
    detector: LanguageDetector | None

    @classmethod
    def build(cls, source_lang: str, target_lang: str, cleaning: CleaningConfig) -> PairFilters:
        """Raises UserError, before any text is read, for a language the language filter does not know; the
        script filter, on by default, is turned off with a warning for a language outside its table."""
        unknown = [language for language in (source_lang, target_lang) if language not in SCRIPTS]
        if cleaning.filter_scripts and unknown:
            warn(
                f"the script filter does not know language {unknown[0]!r}: it is off for this corpus "
                "(--no-filter-scripts, or filter_scripts = false in [preprocess], says so)"
            )
            cleaning = replace(cleaning, filter_scripts=False)
        if cleaning.filter_langid:
            for language in (source_lang, target_lang):
                check(
                    language in NAMES,
                    f"the language filter does not know language {language!r}; turn it off: "
                    "--no-filter-langid, or filter_langid = false in [preprocess]",
                )
        detector = _detector((source_lang, target_lang)) if cleaning.filter_langid else None
        return cls((source_lang, target_lang), cleaning, detector)

    def narrow(self, src: Sequence[str], tgt: Sequence[str], keep: np.ndarray) -> dict[str, int]:
        """Clear `keep` where a filter drops the pair, each filter reading only the pairs still kept (FILTER_REASONS'
        order); returns how many pairs each reason dropped (0 for a filter that is off)."""
        source_lang, target_lang = self.languages
        detector = self.detector
        passes = {  # reason -> whether it is on, and which of the given pairs it keeps; in FILTER_REASONS' order
            "same_text": (self.cleaning.filter_same, lambda s, t: ~same_text(s, t)),
            "unexpected_script": (
                self.cleaning.filter_scripts,
                lambda s, t: scripts_ok(s, source_lang) & scripts_ok(t, target_lang),
            ),
            "wrong_language": (
                detector is not None,
                lambda s, t: language_ok(detector, s, source_lang) & language_ok(detector, t, target_lang),
            ),
        }
        dropped = dict.fromkeys(FILTER_REASONS, 0)
        for reason, (on, kept_by) in passes.items():
            index = np.flatnonzero(keep)
            if not on or not len(index):
                continue
            bad = ~kept_by([src[i] for i in index], [tgt[i] for i in index])
            keep[index[bad]] = False
            dropped[reason] = int(bad.sum())
        return dropped
