"""Which language a text is in, offline: py3langid's model from inside its wheel, no torch, no network.
Chosen by `benchmarks/run.py langid` (BENCHMARKS.md): on Multi30k's en/de/fr/cs captions 99.7% right over all its
languages and 100% restricted to the four, 10,700 lines/s (28,500 restricted), a 4.6 MB wheel, BSD-3; it restricts by
renormalising over the chosen languages, where fastText's pruned ranking can hold none of them. Imported on load only.
probabilities() scores a whole batch of texts with numpy (mtkit preprocess's language filter), about 4x detect().
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mtkit.errors import UserError

CANDIDATES = 3  # per text: the best and up to two runners-up
# probabilities(): text x language cells scored at once. Bounds the [(text, feature), language] buffer (a caption has
# about 50 distinct features) while keeping the per-byte numpy steps few: 8,192 texts when restricted to two languages.
BATCH_CELLS = 16_384

# English names of the languages offered: py3langid 0.4.0's labels that are ISO 639-1 codes. Its other labels
# (three-letter codes of dialects and smaller languages, zxx for "no language") are left out: callers such as
# LibreTranslate's API speak ISO 639-1.
NAMES = {
    "af": "Afrikaans",
    "am": "Amharic",
    "an": "Aragonese",
    "ar": "Arabic",
    "as": "Assamese",
    "az": "Azerbaijani",
    "ba": "Bashkir",
    "be": "Belarusian",
    "bg": "Bulgarian",
    "bn": "Bengali",
    "br": "Breton",
    "bs": "Bosnian",
    "ca": "Catalan",
    "cs": "Czech",
    "cy": "Welsh",
    "da": "Danish",
    "de": "German",
    "dz": "Dzongkha",
    "el": "Greek",
    "en": "English",
    "eo": "Esperanto",
    "es": "Spanish",
    "et": "Estonian",
    "eu": "Basque",
    "fa": "Persian",
    "fi": "Finnish",
    "fo": "Faroese",
    "fr": "French",
    "fy": "Western Frisian",
    "ga": "Irish",
    "gd": "Scottish Gaelic",
    "gl": "Galician",
    "gu": "Gujarati",
    "ha": "Hausa",
    "he": "Hebrew",
    "hi": "Hindi",
    "hr": "Croatian",
    "ht": "Haitian Creole",
    "hu": "Hungarian",
    "hy": "Armenian",
    "id": "Indonesian",
    "ig": "Igbo",
    "is": "Icelandic",
    "it": "Italian",
    "ja": "Japanese",
    "jv": "Javanese",
    "ka": "Georgian",
    "kk": "Kazakh",
    "km": "Khmer",
    "kn": "Kannada",
    "ko": "Korean",
    "ku": "Kurdish",
    "ky": "Kyrgyz",
    "la": "Latin",
    "lb": "Luxembourgish",
    "lg": "Ganda",
    "ln": "Lingala",
    "lo": "Lao",
    "lt": "Lithuanian",
    "lv": "Latvian",
    "mg": "Malagasy",
    "mk": "Macedonian",
    "ml": "Malayalam",
    "mn": "Mongolian",
    "mr": "Marathi",
    "ms": "Malay",
    "mt": "Maltese",
    "my": "Burmese",
    "ne": "Nepali",
    "nl": "Dutch",
    "nn": "Norwegian Nynorsk",
    "no": "Norwegian",
    "oc": "Occitan",
    "om": "Oromo",
    "or": "Odia",
    "pa": "Punjabi",
    "pl": "Polish",
    "ps": "Pashto",
    "pt": "Portuguese",
    "qu": "Quechua",
    "ro": "Romanian",
    "ru": "Russian",
    "rw": "Kinyarwanda",
    "sa": "Sanskrit",
    "se": "Northern Sami",
    "si": "Sinhala",
    "sk": "Slovak",
    "sl": "Slovenian",
    "sn": "Shona",
    "so": "Somali",
    "sq": "Albanian",
    "sr": "Serbian",
    "st": "Southern Sotho",
    "sv": "Swedish",
    "sw": "Swahili",
    "ta": "Tamil",
    "te": "Telugu",
    "tg": "Tajik",
    "th": "Thai",
    "tk": "Turkmen",
    "tl": "Tagalog",
    "tr": "Turkish",
    "tt": "Tatar",
    "ug": "Uyghur",
    "uk": "Ukrainian",
    "ur": "Urdu",
    "uz": "Uzbek",
    "vi": "Vietnamese",
    "vo": "Volapük",
    "wa": "Walloon",
    "xh": "Xhosa",
    "yo": "Yoruba",
    "zh": "Chinese",
    "zu": "Zulu",
}
SUPPORTED = tuple(sorted(NAMES))


def language_name(code: str) -> str:
    """The English name of an ISO 639-1 code ("de" -> "German"); an unknown code is returned as it is."""
    return NAMES.get(code, code)


@dataclass(frozen=True)
class Detection:
    """One candidate language of a text."""

    language: str  # ISO 639-1 code, lower case ("en")
    confidence: float  # 0..100, as LibreTranslate reports it


class LanguageDetector:
    """Detects among `languages` (None: all of SUPPORTED); loading takes about half a second. Thread-safe."""

    def __init__(self, languages: Sequence[str] | None = None) -> None:
        self.languages: tuple[str, ...] = SUPPORTED if languages is None else _checked(languages)
        self._identifier = _load(self.languages)

    def detect(self, texts: Sequence[str]) -> list[list[Detection]]:
        """Per text, up to CANDIDATES detections, best first; [] for a text that is empty or only whitespace.

        The confidence is py3langid's probability of the language times 100: the softmax of its naive Bayes
        log-likelihoods over `languages` only, divided by sqrt(bytes of text) so that it stays calibrated from
        short lines to long ones (py3langid's norm_probs).
        """
        if isinstance(texts, str):
            raise TypeError("detect() takes a sequence of texts, not one str")
        return [self._detect_one(text) for text in texts]

    def probabilities(self, texts: Sequence[str]) -> np.ndarray:
        """[len(texts), len(languages)] float32: each text's probability of each of `languages` (detect()'s
        confidences / 100, unrounded, every language); uniform for a text without features (empty, digits only)."""
        if isinstance(texts, str):
            raise TypeError("probabilities() takes a sequence of texts, not one str")
        batch = max(64, BATCH_CELLS // len(self.languages))
        parts = [_score_batch(self._tables, texts[i : i + batch]) for i in range(0, len(texts), batch)]
        return np.concatenate(parts) if parts else np.zeros((0, len(self.languages)), np.float32)

    @functools.cached_property
    def _tables(self) -> _Tables:
        return _tables(self._identifier, self.languages)

    def _detect_one(self, text: str) -> list[Detection]:
        if not text.strip():
            return []
        # rank() only reads the model: identifiers restricted once at load are safe to share between threads
        ranked = self._identifier.rank(text)[:CANDIDATES]
        return [Detection(code, min(100.0, round(100 * probability, 2))) for code, probability in ranked]


def _checked(languages: Sequence[str]) -> tuple[str, ...]:
    codes = sorted({code.strip().lower() for code in languages})
    unknown = [code for code in codes if code not in NAMES]
    if unknown:
        raise UserError(f"language detection does not know {', '.join(unknown)}; it knows: {', '.join(SUPPORTED)}")
    if not codes:
        raise UserError(f"language detection needs at least one language; it knows: {', '.join(SUPPORTED)}")
    return tuple(codes)


def _load(languages: tuple[str, ...]) -> Any:
    """py3langid's identifier with probabilities, restricted to `languages`."""
    try:
        from py3langid.langid import MODEL_FILE, LanguageIdentifier
    except ImportError as error:
        raise UserError("language detection needs py3langid: pip install -e '.[langid]'") from error
    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    identifier.set_languages(languages)
    return identifier


@dataclass(frozen=True)
class _Tables:
    """py3langid 0.4.0's model as numpy arrays for batched scoring (its own classify() walks one text at a time)."""

    encode: Callable[[str], bytes]  # upper-case text lowered, NFC, UTF-8: py3langid's own
    nextmove: np.ndarray  # the byte DFA: next state = nextmove[rowbase[state] + byte]
    rowbase: np.ndarray
    output: np.ndarray  # state -> the feature it counts, -1 for none
    log_likelihood: np.ndarray  # [feature, column] float32
    prior: np.ndarray  # [column]
    language_of_column: np.ndarray  # column -> index in `languages`; a label may own two columns (sr, uz)
    languages: int


def _tables(identifier: Any, languages: tuple[str, ...]) -> _Tables:
    return _Tables(
        identifier._encode,
        np.frombuffer(identifier.tk_nextmove, dtype=np.uint32),
        np.asarray(identifier._rowbase, dtype=np.int64),
        np.asarray(identifier.tk_output, dtype=np.int64),
        np.asarray(identifier.nb_ptc, dtype=np.float32),
        np.asarray(identifier.nb_pc, dtype=np.float32),
        np.array([languages.index(code) for code in identifier.nb_classes]),
        len(languages),
    )


def _score_batch(tables: _Tables, texts: Sequence[str]) -> np.ndarray:
    """py3langid's norm_probs scores of `texts`, all walked through the DFA together: one numpy step per byte
    position instead of one Python step per byte of each text."""
    encoded = [tables.encode(text) for text in texts]
    lengths = np.fromiter(map(len, encoded), np.int64, len(encoded))
    order = np.argsort(-lengths, kind="stable")  # longest first: the texts still being read are always a prefix
    lengths = lengths[order]
    flat = np.frombuffer(b"".join([encoded[i] for i in order]), dtype=np.uint8)
    starts = np.cumsum(lengths) - lengths
    ascending = lengths[::-1]
    state = np.zeros(len(texts), dtype=np.int64)
    hit_text, hit_feature = [], []
    for position in range(int(lengths[0]) if len(texts) else 0):
        reading = len(texts) - int(np.searchsorted(ascending, position, side="right"))
        state[:reading] = tables.nextmove[tables.rowbase[state[:reading]] + flat[starts[:reading] + position]]
        feature = tables.output[state[:reading]]
        hit = np.flatnonzero(feature >= 0)
        hit_text.append(hit)
        hit_feature.append(feature[hit])
    # Each (text, feature) once with its count: sorted by text, so each text's rows are one segment.
    features = len(tables.log_likelihood)
    key = np.sort(
        np.concatenate(hit_text or [np.zeros(0, np.int64)]) * features
        + np.concatenate(hit_feature or [np.zeros(0, np.int64)])
    )
    first = np.flatnonzero(np.diff(key, prepend=-1))
    counts = np.diff(first, append=len(key)).astype(np.float32)
    text, feature = np.divmod(key[first], features)
    weighted = np.log1p(counts)[:, None] * tables.log_likelihood[feature]  # [pairs, columns]
    scores = np.zeros((len(texts), len(tables.prior)), dtype=np.float32)  # a text without features: uniform
    segment = np.flatnonzero(np.diff(text, prepend=-1))
    if len(segment):
        scores[text[segment]] = np.add.reduceat(weighted, segment, axis=0) + tables.prior
    scores /= np.sqrt(np.maximum(lengths, 1)).astype(np.float32)[:, None]  # py3langid's T = sqrt(bytes)
    scores = np.exp(scores - scores.max(axis=1, keepdims=True))
    scores /= scores.sum(axis=1, keepdims=True)
    folded = np.zeros((len(texts), tables.languages), dtype=np.float32)
    np.add.at(folded.T, tables.language_of_column, scores.T)
    result = np.empty_like(folded)
    result[order] = folded
    return result
