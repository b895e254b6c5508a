"""What `mtkit preprocess` reads and how it cleans: PreprocessConfig, whose fields declare each option's default
and help once (the CLI, the recipe's [preprocess] section and the Python API all read them here), and the
training corpora of a run ([[preprocess.corpora]]) as CorpusConfig, each resolved against the section.

Stdlib and mtkit.errors/files only: the CLI imports it before any command runs.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from mtkit.errors import check
from mtkit.files import BAD_UTF8_MODES

DEFAULT_HF_SPLITS = {"train": "train", "valid": "validation", "test": "test"}
LANGUAGE_TOKENS = ("auto", "always", "never")  # auto: on when the corpora have more than one target language
CORPUS_NAME = re.compile(r"[A-Za-z0-9_-]+")
LEGACY_CORPUS = "train"  # the one corpus of a section without [[preprocess.corpora]]: split "train", as always
# Cleaning settings a corpus may set for itself; the section's values are the default.
CLEANING_KEYS = ("max_len", "max_ratio", "min_len", "dedup", "filter_same", "filter_scripts", "filter_langid")


@dataclass
class PreprocessConfig:
    """What to read, how to tokenize and how to clean the train split."""

    source_lang: str = ""  # with corpora: each corpus's default
    target_lang: str = ""
    train: str | None = None  # file prefix: PREFIX.{lang} or PREFIX.{lang}.gz
    # A prefix (several language pairs: PREFIX.{src} + PREFIX.{tgt} read for each), or a table "src-tgt" -> prefix.
    valid: str | dict[str, str] | None = None
    test: list[str] = field(default_factory=list)  # each prefix's basename becomes the split name (+ ".src-tgt")
    corpora: list[dict[str, Any]] = field(default_factory=list)  # [[preprocess.corpora]]: see CorpusConfig
    language_tokens: str = "auto"  # >>xx<< at the start of every source: auto, always or never
    hf_dataset: str | None = None  # hub name or local dir, `translation` column (as wmt/wmt14)
    hf_config: str | None = None
    hf_cache_dir: str | None = None  # datasets' download + Arrow cache (WMT14 en-fr: about 20 GB); None: its default
    hf_splits: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_HF_SPLITS))  # ours -> HF's
    vocab_size: int = field(default=8000, metadata={"help": "Joint sentencepiece BPE vocabulary size."})
    character_coverage: float = field(default=1.0, metadata={"help": "sentencepiece character coverage."})
    input_sentence_size: int = field(
        default=2_000_000, metadata={"help": "Sentences (both sides) sampled to train BPE."}
    )
    spm_model: str | None = None  # reuse this model instead of training one
    max_len: int = field(default=256, metadata={"help": "Drop training pairs longer than this (pieces)."})
    max_ratio: float = field(
        default=9.0, metadata={"help": "Drop training pairs with a longer/shorter ratio above this."}
    )
    dedup: bool = field(default=False, metadata={"help": "Drop exact duplicate training pairs."})
    # The built-in filters (mtkit.corpus.filters). On Multi30k's 29,000 train pairs they drop none (2026-11-25).
    filter_same: bool = field(
        default=True, metadata={"help": "Drop training pairs whose source equals the target (case and spacing aside)."}
    )
    filter_scripts: bool = field(
        default=True,
        metadata={
            "help": "Drop training pairs with letters outside their languages' scripts "
            "(Latin letters are always allowed)."
        },
    )
    filter_langid: bool = field(
        default=False,
        metadata={
            "help": "Drop training pairs with a side that reads as the pair's other language (py3langid, offline: "
            "pip install -e '.[langid]')."
        },
    )
    min_len: int = 1
    workers: int = field(default=1, metadata={"help": "Encoding worker processes."})
    on_bad_utf8: str = field(default="error", metadata={"help": "Undecodable bytes in the text: error or replace."})
    seed: int = 1

    def __post_init__(self) -> None:
        self.test = list(self.test)
        self.corpora = [dict(corpus) for corpus in self.corpora]
        check(
            self.corpora or (self.source_lang and self.target_lang and self.source_lang != self.target_lang),
            f"source and target languages must be two different codes, got {self.source_lang!r}, {self.target_lang!r}",
        )
        check(
            self.language_tokens in LANGUAGE_TOKENS,
            f"language_tokens must be one of {', '.join(LANGUAGE_TOKENS)}, got {self.language_tokens!r}",
        )
        check(self.vocab_size > 0, f"vocab_size must be positive, got {self.vocab_size}")
        check(1 <= self.min_len <= self.max_len, f"need 1 <= min_len <= max_len, got {self.min_len}, {self.max_len}")
        check(self.max_ratio >= 1.0, f"max_ratio must be >= 1, got {self.max_ratio}")
        check(self.workers >= 1, f"workers must be >= 1, got {self.workers}")
        check(self.on_bad_utf8 in BAD_UTF8_MODES, f"on_bad_utf8 must be one of {BAD_UTF8_MODES}")
        corpus_configs(self)  # every corpus is checked before anything is read


@dataclass
class CorpusConfig:
    """One training corpus ([[preprocess.corpora]]): its text (a file prefix or a Hugging Face split), its direction,
    its sampling weight, an optional tag put at the start of each of its sources, and its cleaning."""

    name: str
    source_lang: str
    target_lang: str
    train: str | None = None  # file prefix: PREFIX.{source_lang} + PREFIX.{target_lang}, plain or .gz
    hf_dataset: str | None = None
    hf_config: str | None = None
    hf_split: str = "train"
    weight: float = (
        1.0  # share of each epoch (mtkit.corpus.mixing); `mtkit train` may change it without preprocessing again
    )
    tag: str | None = None  # e.g. "<bt>" for back-translated text: one piece of the vocabulary
    max_len: int = 256
    max_ratio: float = 9.0
    min_len: int = 1
    dedup: bool = False
    filter_same: bool = True
    filter_scripts: bool = True
    filter_langid: bool = False

    @property
    def pair(self) -> str:
        return f"{self.source_lang}-{self.target_lang}"


def corpus_configs(cfg: PreprocessConfig) -> list[CorpusConfig]:
    """The run's training corpora, each key the corpus leaves out taken from the section; without
    [[preprocess.corpora]], the section's own train file or Hugging Face corpus as one corpus named "train"."""
    section = {key: getattr(cfg, key) for key in CLEANING_KEYS}
    langs = {"source_lang": cfg.source_lang, "target_lang": cfg.target_lang}
    if not cfg.corpora:
        if cfg.train:
            return [CorpusConfig(LEGACY_CORPUS, **langs, train=cfg.train, **section)]
        if cfg.hf_dataset and "train" in cfg.hf_splits:
            return [
                CorpusConfig(
                    LEGACY_CORPUS,
                    **langs,
                    hf_dataset=cfg.hf_dataset,
                    hf_config=cfg.hf_config,
                    hf_split=cfg.hf_splits["train"],
                    **section,
                )
            ]
        return []
    check(
        not (cfg.train or cfg.hf_dataset),
        "[preprocess]: give the training data either as [[preprocess.corpora]] or as train/hf_dataset, not both",
    )
    corpora = [_corpus(values, {**langs, **section}) for values in cfg.corpora]
    names = [corpus.name for corpus in corpora]
    repeated = sorted({name for name in names if names.count(name) > 1})
    check(not repeated, f"corpus {', '.join(repeated)}: two corpora have this name; names must be unique")
    return corpora


def _corpus(values: dict[str, Any], defaults: dict[str, Any]) -> CorpusConfig:
    name = values.get("name")
    check(
        isinstance(name, str) and CORPUS_NAME.fullmatch(name),
        f"[[preprocess.corpora]]: every corpus needs a name of letters, digits, _ and - (got {name!r})",
    )
    where = f"corpus {name}"
    fields = {f.name: f for f in dataclasses.fields(CorpusConfig)}
    for key, value in values.items():
        check(key in fields, f"{where}: unknown key {key!r}; valid keys: {', '.join(fields)}")
        _check_type(where, key, value, fields[key].default)
    corpus = CorpusConfig(**{**defaults, **values})
    corpus.weight, corpus.max_ratio = float(corpus.weight), float(corpus.max_ratio)
    check(
        corpus.source_lang and corpus.target_lang and corpus.source_lang != corpus.target_lang,
        f"{where}: source_lang and target_lang must be two different codes, got {corpus.source_lang!r}, "
        f"{corpus.target_lang!r}",
    )
    check(
        bool(corpus.train) != bool(corpus.hf_dataset), f"{where}: give train (a file prefix) or hf_dataset, one of them"
    )
    check(corpus.weight > 0, f"{where}: weight must be positive, got {corpus.weight}")
    check(
        corpus.tag is None or (corpus.tag and not any(c.isspace() for c in corpus.tag)),
        f"{where}: tag {corpus.tag!r} must be one word without spaces",
    )
    check(
        1 <= corpus.min_len <= corpus.max_len,
        f"{where}: need 1 <= min_len <= max_len, got {corpus.min_len}, {corpus.max_len}",
    )
    check(corpus.max_ratio >= 1.0, f"{where}: max_ratio must be >= 1, got {corpus.max_ratio}")
    return corpus


def _check_type(where: str, key: str, value: Any, default: Any) -> None:
    """The type of `default` (str where it is None or missing); an int is a float too, a bool never an int."""
    expected = str if default is None or default is dataclasses.MISSING else type(default)
    ok = isinstance(value, expected) and not (expected is int and isinstance(value, bool))
    ok = ok or (expected is float and isinstance(value, int) and not isinstance(value, bool))
    check(ok, f"{where}: {key} must be a {expected.__name__}, got {value!r}")
