"""What `mtkit preprocess` reads and how it cleans: PreprocessConfig, whose fields declare each option's default
and help once (the CLI, the recipe's [preprocess] section and the Python API all read them here).

Stdlib and mtkit.errors/files only: the CLI imports it before any command runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mtkit.errors import check
from mtkit.files import BAD_UTF8_MODES

DEFAULT_HF_SPLITS = {"train": "train", "valid": "validation", "test": "test"}


@dataclass
class PreprocessConfig:
    """What to read, how to tokenize and how to clean the train split."""

    source_lang: str
    target_lang: str
    train: str | None = None  # file prefix: PREFIX.{lang} or PREFIX.{lang}.gz
    valid: str | None = None
    test: list[str] = field(default_factory=list)  # each prefix's basename becomes the split name
    hf_dataset: str | None = None  # hub name or local dir, `translation` column (as wmt/wmt14)
    hf_config: str | None = None
    hf_cache_dir: str | None = None  # datasets' download + Arrow cache (WMT14 en-fr: about 20 GB); None: its default
    hf_splits: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_HF_SPLITS))  # ours -> HF's
    vocab_size: int = field(default=8000, metadata={"help": "Joint sentencepiece BPE vocabulary size."})
    character_coverage: float = field(default=1.0, metadata={"help": "sentencepiece character coverage."})
    input_sentence_size: int = field(default=2_000_000, metadata={"help": "Sentences (both sides) sampled to train BPE."})
    spm_model: str | None = None  # reuse this model instead of training one
    max_len: int = field(default=256, metadata={"help": "Drop training pairs longer than this (pieces)."})
    max_ratio: float = field(default=9.0, metadata={"help": "Drop training pairs with a longer/shorter ratio above this."})
    dedup: bool = field(default=False, metadata={"help": "Drop exact duplicate training pairs."})
    # The built-in filters (mtkit.corpus_filters). On Multi30k's 29,000 train pairs they drop none (2026-11-25).
    filter_same: bool = field(default=True, metadata={
        "help": "Drop training pairs whose source equals the target (case and spacing aside)."})
    filter_scripts: bool = field(default=True, metadata={
        "help": "Drop training pairs with letters outside their languages' scripts (Latin letters are always allowed)."})
    filter_langid: bool = field(default=False, metadata={
        "help": "Drop training pairs with a side that reads as the pair's other language (py3langid, offline: "
                "pip install -e '.[langid]')."})
    min_len: int = 1
    workers: int = field(default=1, metadata={"help": "Encoding worker processes."})
    on_bad_utf8: str = field(default="error", metadata={"help": "Undecodable bytes in the text: error or replace."})
    seed: int = 1

    def __post_init__(self) -> None:
        self.test = list(self.test)
        check(
            self.source_lang and self.target_lang and self.source_lang != self.target_lang,
            f"source and target languages must be two different codes, got {self.source_lang!r}, {self.target_lang!r}",
        )
        check(self.vocab_size > 0, f"vocab_size must be positive, got {self.vocab_size}")
        check(1 <= self.min_len <= self.max_len, f"need 1 <= min_len <= max_len, got {self.min_len}, {self.max_len}")
        check(self.max_ratio >= 1.0, f"max_ratio must be >= 1, got {self.max_ratio}")
        check(self.workers >= 1, f"workers must be >= 1, got {self.workers}")
        check(self.on_bad_utf8 in BAD_UTF8_MODES, f"on_bad_utf8 must be one of {BAD_UTF8_MODES}")
