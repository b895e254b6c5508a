"""What `mtkit preprocess` reads and how it cleans: PreprocessConfig, whose fields declare each option's default
and help once (the CLI, the recipe's [preprocess] section and the Python API all read them here), CleaningConfig,
the cleaning of a training corpus, and the training corpora of a run ([[preprocess.corpora]]) as CorpusConfig, each
resolved against the section. Each config checks itself in __post_init__ and refuses a bad value naming the field.

Stdlib and mtkit.errors/files only: the CLI imports it before any command runs.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

from mtkit.errors import UserError, check
from mtkit.files import BAD_UTF8_MODES

DEFAULT_HF_SPLITS = {"train": "train", "valid": "validation", "test": "test"}
LANGUAGE_TOKENS = ("auto", "always", "never")  # auto: on when the corpora have more than one target language
CORPUS_NAME = re.compile(r"[A-Za-z0-9_-]+")
LEGACY_CORPUS = "train"  # the one corpus of a section without [[preprocess.corpora]]: split "train", as always


def hf_dataset_field() -> Any:
    """A corpus from the Hugging Face hub: a name or local dir with a `translation` column (as wmt/wmt14)."""
    return field(default=None, metadata={"help": "HuggingFace datasets name or local path (e.g. wmt/wmt14)."})


def hf_config_field() -> Any:
    return field(default=None, metadata={"help": "HuggingFace config (e.g. de-en)."})


@dataclass
class CleaningConfig:
    """How a training corpus is cleaned. Each field is a key of [preprocess] (the run's cleaning) and of a corpus's
    [[preprocess.corpora]] table (that corpus's own, the run's where it sets none), and, but min_len, a `mtkit
    preprocess` flag whose help is the field's. A message begins with the field's name; the config holding this one
    puts its place before it (preprocess.max_len, corpus NAME: max_len)."""

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
    min_len: int = field(  # a recipe key only: no flag
        default=1, metadata={"help": "Drop training pairs shorter than this (pieces)."}
    )

    def __post_init__(self) -> None:
        self.max_ratio = float(self.max_ratio)  # a TOML table may spell it 2
        check(self.max_len >= 1, f"max_len must be at least 1, got {self.max_len}")
        check(
            1 <= self.min_len <= self.max_len,
            f"min_len must be at least 1 and at most max_len ({self.max_len}), got {self.min_len}",
        )
        check(self.max_ratio >= 1.0, f"max_ratio must be >= 1, got {self.max_ratio}")


@dataclass
class PreprocessConfig:
    """What to read, how to tokenize and how to clean the train split."""

    # With corpora: each corpus's default.
    source_lang: str = field(default="", metadata={"help": "Source language suffix, e.g. en."})
    target_lang: str = field(default="", metadata={"help": "Target language suffix, e.g. de."})
    # A file prefix: PREFIX.{lang} or PREFIX.{lang}.gz; a glob or a directory of such pairs; or translation files.
    train: str | None = field(
        default=None,
        metadata={
            "help": "Training PREFIX: PREFIX.SRC + PREFIX.TGT (plain or .gz), or a glob or folder of such pairs; "
            "or a .tmx, .po, .mo or .xlf/.xliff file, or a glob or folder of them."
        },
    )
    # A prefix (several language pairs: PREFIX.{src} + PREFIX.{tgt} read for each), or a table "src-tgt" -> prefix.
    valid: str | dict[str, str] | None = field(
        default=None, metadata={"help": "Validation PREFIX or translation files (never filtered)."}
    )
    # Each prefix's basename becomes the split name (+ ".src-tgt").
    test: list[str] = field(
        default_factory=list, metadata={"help": "Test PREFIX or translation files (repeatable; never filtered)."}
    )
    corpora: list[dict[str, Any]] = field(  # [[preprocess.corpora]]: see CorpusConfig
        default_factory=list, metadata={"help": "The training corpora, each a table of CorpusConfig's keys."}
    )
    language_tokens: str = field(
        default="auto",
        metadata={
            "help": ">>xx<< at the start of every source: auto (when the corpora have more than one target "
            "language), always or never."
        },
    )
    hf_dataset: str | None = hf_dataset_field()
    hf_config: str | None = hf_config_field()
    # datasets' download + Arrow cache (WMT14 en-fr: about 20 GB); None: its default.
    hf_cache_dir: str | None = field(
        default=None,
        metadata={"help": "Where datasets downloads and caches the corpus (default: its own, ~/.cache/huggingface)."},
    )
    hf_splits: dict[str, str] = field(
        default_factory=lambda: dict(DEFAULT_HF_SPLITS),
        metadata={"help": "Our split name -> the Hugging Face dataset's (train, valid, test)."},
    )
    vocab_size: int = field(default=8000, metadata={"help": "Joint sentencepiece BPE vocabulary size."})
    character_coverage: float = field(default=1.0, metadata={"help": "sentencepiece character coverage."})
    input_sentence_size: int = field(
        default=2_000_000, metadata={"help": "Sentences (both sides) sampled to train BPE."}
    )
    spm_model: str | None = field(
        default=None,
        metadata={
            "help": "Reuse this tokenizer: a sentencepiece model, or a run's spm.model (an imported model's to "
            "fine-tune it)."
        },
    )
    # The run's cleaning. Its keys stand flat in [preprocess] and in manifest.json's "options" (manifest_options),
    # here, between spm_model and workers, as before CleaningConfig held them.
    cleaning: CleaningConfig = field(
        default_factory=CleaningConfig, metadata={"help": "How the training corpora are cleaned (CleaningConfig)."}
    )
    workers: int = field(default=1, metadata={"help": "Encoding worker processes."})
    on_bad_utf8: str = field(default="error", metadata={"help": "Undecodable bytes in the text: error or replace."})
    seed: int = field(default=1, metadata={"help": "Random seed of sentencepiece's training and the alignments."})

    def __post_init__(self) -> None:
        self.test = list(self.test)
        self.corpora = [dict(corpus) for corpus in self.corpora]
        check(
            self.corpora or (self.source_lang and self.target_lang and self.source_lang != self.target_lang),
            "preprocess.source_lang and preprocess.target_lang must be two different codes, got "
            f"{self.source_lang!r}, {self.target_lang!r}",
        )
        check(
            self.language_tokens in LANGUAGE_TOKENS,
            f"preprocess.language_tokens must be one of {', '.join(LANGUAGE_TOKENS)}, got {self.language_tokens!r}",
        )
        check(self.vocab_size > 0, f"preprocess.vocab_size must be positive, got {self.vocab_size}")
        check(self.workers >= 1, f"preprocess.workers must be >= 1, got {self.workers}")
        check(
            self.on_bad_utf8 in BAD_UTF8_MODES,
            f"preprocess.on_bad_utf8 must be one of {', '.join(BAD_UTF8_MODES)}, got {self.on_bad_utf8!r}",
        )
        corpus_configs(self)  # every corpus is checked before anything is read


def manifest_options(cfg: PreprocessConfig) -> dict[str, Any]:
    """`cfg` as manifest.json's "options" records it: asdict's, with the cleaning keys in the place of `cleaning`,
    as [preprocess] spells them, so data directories written before and after CleaningConfig read alike."""
    options: dict[str, Any] = {}
    for key, value in dataclasses.asdict(cfg).items():
        options.update(value if key == "cleaning" else {key: value})
    return options


@dataclass
class CorpusConfig:
    """One training corpus ([[preprocess.corpora]]): its text (a file prefix or a Hugging Face split), its direction,
    its sampling weight, an optional tag put at the start of each of its sources, and its cleaning."""

    name: str = field(metadata={"help": "The corpus's name (letters, digits, _ and -): its split is train.NAME."})
    source_lang: str = field(metadata={"help": "Source language suffix, e.g. en."})
    target_lang: str = field(metadata={"help": "Target language suffix, e.g. de."})
    train: str | None = field(
        default=None,
        metadata={
            "help": "File prefix: PREFIX.{source_lang} + PREFIX.{target_lang}, plain or .gz (or a glob); translation "
            "files (.tmx, .po, .mo, .xlf/.xliff: a file, glob or folder); or give hf_dataset."
        },
    )
    hf_dataset: str | None = hf_dataset_field()
    hf_config: str | None = hf_config_field()
    hf_split: str = field(default="train", metadata={"help": "The Hugging Face dataset's split to read."})
    # `mtkit train` may change it without preprocessing again.
    weight: float = field(default=1.0, metadata={"help": "Its share of each epoch (mtkit.corpus.mixing)."})
    tag: str | None = field(
        default=None,
        metadata={
            "help": 'A piece put at the start of each of its sources, e.g. "<bt>" for back-translated text: one '
            "piece of the vocabulary."
        },
    )
    # Neural fuzzy repair (mtkit.corpus.fuzzy_matches): this corpus is its pairs that have a match, each source
    # followed by the match's target; list the same text again without it so the model also learns plain sentences.
    fuzzy_matches: int = field(
        default=0,
        metadata={
            "help": "0 (off), or the lowest fuzzy score (1-99) at which each pair's source is given the target of "
            "its best match among the corpus's other pairs; pairs without one are left out."
        },
    )
    cleaning: CleaningConfig = field(  # its table's keys stand flat beside the others
        default_factory=CleaningConfig,
        metadata={"help": "How it is cleaned (CleaningConfig; the section's where it sets none)."},
    )

    def __post_init__(self) -> None:
        _check_name(self.name)
        where = f"corpus {self.name}"
        self.weight = float(self.weight)
        check(
            self.source_lang and self.target_lang and self.source_lang != self.target_lang,
            f"{where}: source_lang and target_lang must be two different codes, got {self.source_lang!r}, "
            f"{self.target_lang!r}",
        )
        check(
            bool(self.train) != bool(self.hf_dataset), f"{where}: give train (a file prefix) or hf_dataset, one of them"
        )
        check(self.weight > 0, f"{where}: weight must be positive, got {self.weight}")
        check(0 <= self.fuzzy_matches <= 99, f"{where}: fuzzy_matches must be 0 (off) to 99, got {self.fuzzy_matches}")
        check(
            self.tag is None or (self.tag and not any(c.isspace() for c in self.tag)),
            f"{where}: tag {self.tag!r} must be one word without spaces",
        )

    @property
    def pair(self) -> str:
        return f"{self.source_lang}-{self.target_lang}"


def corpus_configs(cfg: PreprocessConfig) -> list[CorpusConfig]:
    """The run's training corpora, each key the corpus leaves out taken from the section; without
    [[preprocess.corpora]], the section's own train file or Hugging Face corpus as one corpus named "train"."""
    langs = {"source_lang": cfg.source_lang, "target_lang": cfg.target_lang}
    if not cfg.corpora:
        if cfg.train:
            return [CorpusConfig(LEGACY_CORPUS, **langs, train=cfg.train, cleaning=cfg.cleaning)]
        if cfg.hf_dataset and "train" in cfg.hf_splits:
            return [
                CorpusConfig(
                    LEGACY_CORPUS,
                    **langs,
                    hf_dataset=cfg.hf_dataset,
                    hf_config=cfg.hf_config,
                    hf_split=cfg.hf_splits["train"],
                    cleaning=cfg.cleaning,
                )
            ]
        return []
    check(
        not (cfg.train or cfg.hf_dataset),
        "[preprocess]: give the training data either as [[preprocess.corpora]] or as train/hf_dataset, not both",
    )
    corpora = [_corpus(values, langs, cfg.cleaning) for values in cfg.corpora]
    names = [corpus.name for corpus in corpora]
    repeated = sorted({name for name in names if names.count(name) > 1})
    check(not repeated, f"corpus {', '.join(repeated)}: two corpora have this name; names must be unique")
    return corpora


def _corpus(values: dict[str, Any], langs: dict[str, str], cleaning: CleaningConfig) -> CorpusConfig:
    """A corpus from its table: the keys it leaves out are the section's (its languages, the run's cleaning)."""
    _check_name(values.get("name"))  # first: every later message names the corpus
    where = f"corpus {values['name']}"
    keys = {f.name: f for f in dataclasses.fields(CorpusConfig) if f.name != "cleaning"}
    cleaning_keys = {f.name: f for f in dataclasses.fields(CleaningConfig)}
    valid = {**keys, **cleaning_keys}
    for key, value in values.items():
        check(key in valid, f"{where}: unknown key {key!r}; valid keys: {', '.join(valid)}")
        _check_type(where, key, value, valid[key].default)
    try:
        own = dataclasses.replace(cleaning, **{key: value for key, value in values.items() if key in cleaning_keys})
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None
    return CorpusConfig(**{**langs, **{key: value for key, value in values.items() if key in keys}, "cleaning": own})


def _check_name(name: Any) -> None:
    check(
        isinstance(name, str) and CORPUS_NAME.fullmatch(name),
        f"[[preprocess.corpora]]: every corpus needs a name of letters, digits, _ and - (got {name!r})",
    )


def _check_type(where: str, key: str, value: Any, default: Any) -> None:
    """The type of `default` (str where it is None or missing); an int is a float too, a bool never an int."""
    expected = str if default is None or default is dataclasses.MISSING else type(default)
    ok = isinstance(value, expected) and not (expected is int and isinstance(value, bool))
    ok = ok or (expected is float and isinstance(value, int) and not isinstance(value, bool))
    check(ok, f"{where}: {key} must be a {expected.__name__}, got {value!r}")
