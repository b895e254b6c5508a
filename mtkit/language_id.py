"""Which language a text is in, offline: py3langid's model from inside its wheel, no torch, no network.
Chosen by `benchmarks/run.py langid` (BENCHMARKS.md): on Multi30k's en/de/fr/cs captions 99.7% right over all its
languages and 100% restricted to the four, 10,700 lines/s (28,500 restricted), a 4.6 MB wheel, BSD-3; it restricts by
renormalising over the chosen languages, where fastText's pruned ranking can hold none of them. Imported on load only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mtkit.errors import UserError

CANDIDATES = 3  # per text: the best and up to two runners-up

# English names of the languages offered: py3langid 0.4.0's labels that are ISO 639-1 codes. Its other labels
# (three-letter codes of dialects and smaller languages, zxx for "no language") are left out: callers such as
# LibreTranslate's API speak ISO 639-1.
NAMES = {
    "af": "Afrikaans", "am": "Amharic", "an": "Aragonese", "ar": "Arabic", "as": "Assamese", "az": "Azerbaijani",
    "ba": "Bashkir", "be": "Belarusian", "bg": "Bulgarian", "bn": "Bengali", "br": "Breton", "bs": "Bosnian",
    "ca": "Catalan", "cs": "Czech", "cy": "Welsh", "da": "Danish", "de": "German", "dz": "Dzongkha", "el": "Greek",
    "en": "English", "eo": "Esperanto", "es": "Spanish", "et": "Estonian", "eu": "Basque", "fa": "Persian",
    "fi": "Finnish", "fo": "Faroese", "fr": "French", "fy": "Western Frisian", "ga": "Irish",
    "gd": "Scottish Gaelic", "gl": "Galician", "gu": "Gujarati", "ha": "Hausa", "he": "Hebrew", "hi": "Hindi",
    "hr": "Croatian", "ht": "Haitian Creole", "hu": "Hungarian", "hy": "Armenian", "id": "Indonesian", "ig": "Igbo",
    "is": "Icelandic", "it": "Italian", "ja": "Japanese", "jv": "Javanese", "ka": "Georgian", "kk": "Kazakh",
    "km": "Khmer", "kn": "Kannada", "ko": "Korean", "ku": "Kurdish", "ky": "Kyrgyz", "la": "Latin",
    "lb": "Luxembourgish", "lg": "Ganda", "ln": "Lingala", "lo": "Lao", "lt": "Lithuanian", "lv": "Latvian",
    "mg": "Malagasy", "mk": "Macedonian", "ml": "Malayalam", "mn": "Mongolian", "mr": "Marathi", "ms": "Malay",
    "mt": "Maltese", "my": "Burmese", "ne": "Nepali", "nl": "Dutch", "nn": "Norwegian Nynorsk", "no": "Norwegian",
    "oc": "Occitan", "om": "Oromo", "or": "Odia", "pa": "Punjabi", "pl": "Polish", "ps": "Pashto",
    "pt": "Portuguese", "qu": "Quechua", "ro": "Romanian", "ru": "Russian", "rw": "Kinyarwanda", "sa": "Sanskrit",
    "se": "Northern Sami", "si": "Sinhala", "sk": "Slovak", "sl": "Slovenian", "sn": "Shona", "so": "Somali",
    "sq": "Albanian", "sr": "Serbian", "st": "Southern Sotho", "sv": "Swedish", "sw": "Swahili", "ta": "Tamil",
    "te": "Telugu", "tg": "Tajik", "th": "Thai", "tk": "Turkmen", "tl": "Tagalog", "tr": "Turkish", "tt": "Tatar",
    "ug": "Uyghur", "uk": "Ukrainian", "ur": "Urdu", "uz": "Uzbek", "vi": "Vietnamese", "vo": "Volapük",
    "wa": "Walloon", "xh": "Xhosa", "yo": "Yoruba", "zh": "Chinese", "zu": "Zulu",
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
