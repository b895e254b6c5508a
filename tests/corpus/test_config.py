"""mtkit.corpus.config: the cleaning options are declared once, in CleaningConfig; a corpus takes the run's cleaning
with what its own table sets over it; each config refuses a bad value with a UserError naming the field."""

from __future__ import annotations

import dataclasses

import pytest

from mtkit.corpus.config import CleaningConfig, CorpusConfig, PreprocessConfig, corpus_configs, manifest_options
from mtkit.errors import UserError

CLEANING_KEYS = [f.name for f in dataclasses.fields(CleaningConfig)]


def test_cleaning_defaults_are_declared_once() -> None:
    assert not set(CLEANING_KEYS) & {f.name for f in dataclasses.fields(PreprocessConfig)}
    assert not set(CLEANING_KEYS) & {f.name for f in dataclasses.fields(CorpusConfig)}
    run = PreprocessConfig("en", "de", train="x")
    assert run.cleaning == CleaningConfig() == CorpusConfig("a", "en", "de", train="x").cleaning
    (legacy,) = corpus_configs(run)  # a section without [[preprocess.corpora]]: one corpus, the run's cleaning
    assert legacy.cleaning == run.cleaning


def test_a_corpus_overriding_one_cleaning_option_keeps_the_runs_others() -> None:
    run = CleaningConfig(max_len=40, max_ratio=2, min_len=2, dedup=True, filter_scripts=False, filter_langid=True)
    cfg = PreprocessConfig(
        "en",
        "de",
        cleaning=run,
        corpora=[{"name": "a", "train": "x", "max_len": 12}, {"name": "b", "train": "y", "target_lang": "fr"}],
    )
    a, b = corpus_configs(cfg)
    assert a.cleaning == dataclasses.replace(run, max_len=12) and b.cleaning == run
    assert run.max_len == 40 and cfg.cleaning is run  # the corpus's setting stays its own
    assert isinstance(run.max_ratio, float)


def test_the_manifest_records_the_cleaning_keys_flat_among_the_others() -> None:
    cfg = PreprocessConfig("en", "de", train="x", spm_model="m", cleaning=CleaningConfig(max_len=30, dedup=True))
    options = manifest_options(cfg)
    assert "cleaning" not in options and {key: options[key] for key in CLEANING_KEYS} == dataclasses.asdict(
        cfg.cleaning
    )
    keys = list(options)  # where `cleaning` stands among PreprocessConfig's fields
    assert keys[keys.index("spm_model") + 1 : keys.index("workers")] == CLEANING_KEYS


@pytest.mark.parametrize(
    "bad, field",
    [
        ({"max_len": 0}, "max_len"),
        ({"min_len": 0}, "min_len"),
        ({"min_len": 300}, "min_len"),
        ({"max_ratio": 0.5}, "max_ratio"),
    ],
)
def test_bad_cleaning_values_are_refused_naming_the_field_and_the_corpus(bad: dict, field: str) -> None:
    with pytest.raises(UserError, match=rf"^{field} "):
        CleaningConfig(**bad)
    with pytest.raises(UserError, match=rf"^corpus a: {field} "):
        PreprocessConfig("en", "de", corpora=[{"name": "a", "train": "x", **bad}])


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"vocab_size": 0}, "preprocess.vocab_size "),
        ({"workers": 0}, "preprocess.workers "),
        ({"language_tokens": "sometimes"}, "preprocess.language_tokens "),
        ({"on_bad_utf8": "ignore"}, "preprocess.on_bad_utf8 "),
        ({"target_lang": "en"}, "preprocess.target_lang "),
    ],
)
def test_bad_preprocess_values_are_refused_naming_the_field(bad: dict, message: str) -> None:
    with pytest.raises(UserError, match=message.replace(".", r"\.")):
        PreprocessConfig(**{"source_lang": "en", "target_lang": "de", "train": "x", **bad})


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"name": "a b"}, r"^\[\[preprocess.corpora\]\]: every corpus needs a name"),
        ({"target_lang": "en"}, "^corpus a: source_lang and target_lang "),
        ({"hf_dataset": "wmt/wmt14"}, "^corpus a: give train .* or hf_dataset"),
        ({"weight": 0.0}, "^corpus a: weight must be positive"),
        ({"tag": "<b t>"}, "^corpus a: tag '<b t>' must be one word"),
    ],
)
def test_bad_corpus_values_are_refused_naming_the_field(bad: dict, message: str) -> None:
    with pytest.raises(UserError, match=message):
        CorpusConfig(**{"name": "a", "source_lang": "en", "target_lang": "de", "train": "x", **bad})
