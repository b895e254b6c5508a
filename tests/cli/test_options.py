"""mtkit.cli.options: an option's default and help come from its dataclass field, and --help shows that default."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest
import typer
from typer.testing import CliRunner

from mtkit.cli.main import app
from mtkit.cli.options import flag, given_option, option, recipe_option, values_of
from mtkit.corpus.config import CleaningConfig, PreprocessConfig
from mtkit.engines.config import EngineConfig
from mtkit.search.config import TranslateConfig
from mtkit.serve.config import ServeConfig
from mtkit.training.config import TrainConfig


@dataclass
class Example:
    max_len_a: float = field(default=1.5, metadata={"help": "Slope."})
    no_help: int = 3


def test_option_takes_the_field_default_and_help() -> None:
    made = option(Example, "max_len_a", "-a")
    assert (made.default, made.param_decls, made.help) == (1.5, ("--max-len-a", "-a"), "Slope.")
    recipe = recipe_option(Example, "max_len_a")
    assert recipe.default is None and recipe.help == "Slope. Default: the run's recipe (1.5)."
    assert flag("max_batch_tokens") == "--max-batch-tokens"
    with pytest.raises(AssertionError, match="no metadata help"):
        option(Example, "no_help")
    given = given_option(Example, "max_len_a", "--slope", "-s")
    assert (given.default, given.param_decls, given.help) == (None, ("--slope", "-s"), "Slope.")
    assert given_option(Example, "max_len_a", default=[]).default == []
    assert option(CleaningConfig, "dedup", negatable=True).param_decls == ("--dedup/--no-dedup",)


def test_values_of_keeps_the_config_fields_only() -> None:
    assert values_of(Example, {"max_len_a": 2.0, "model": "run", "quiet": True}) == {"max_len_a": 2.0}


def command_params(name: str) -> dict:
    return {p.name: p for p in typer.main.get_command(app).commands[name].params}


def test_every_serve_option_is_its_config_field() -> None:
    """ServeConfig's own fields, and the EngineConfig fields a server uses (its engine field holds them)."""
    params = command_params("serve")
    own = [f for f in dataclasses.fields(ServeConfig) if f.name != "engine"]
    for f in own:
        assert (params[f.name].default, params[f.name].help) == (f.default, f.metadata["help"]), f.name
    engine = {"engine", "device", "dtype", "ct2_search", "shortlist", "threads"}
    assert set(params) == {f.name for f in own} | engine | {"models"}


# Where a command declares an engine option otherwise than EngineConfig's field, and why.
OWN_ENGINE_OPTIONS = {
    ("score-pairs", "ensemble"): "its help says how an ensemble scores",
    ("distill", "ensemble"): "its help says how teachers ensemble",
    ("filter-pairs", "engine"): "bulk work defaults to ctranslate2 (BULK_ENGINE)",
    ("back-translate", "engine"): "bulk work defaults to ctranslate2 (BULK_ENGINE)",
    ("distill", "engine"): "bulk work defaults to ctranslate2, an ensemble to torch (BULK_ENGINE)",
    ("back-translate", "ct2_search"): "bulk work defaults to native (BULK_CT2_SEARCH)",
    ("distill", "ct2_search"): "bulk work defaults to native (BULK_CT2_SEARCH)",
}


def test_every_engine_option_of_every_command_is_read_from_engine_config() -> None:
    """An option named as an EngineConfig field takes that field's default and help, in every command, but for
    the few declared apart (OWN_ENGINE_OPTIONS); the bulk commands declare --engine once between them."""
    fields = {f.name: f for f in dataclasses.fields(EngineConfig)}
    seen = set()
    for name, command in typer.main.get_command(app).commands.items():
        for param in command.params:
            if param.name in fields and (name, param.name) not in OWN_ENGINE_OPTIONS:
                f = fields[param.name]
                assert (param.default, param.help) == (f.default, f.metadata["help"]), (name, param.name)
                seen.add(param.name)
    assert seen >= {"engine", "device", "dtype", "ct2_search", "shortlist", "ensemble_mode", "ensemble", "threads"}
    engines = {(name, command_params(name)["engine"].help) for name in ("filter-pairs", "back-translate", "distill")}
    assert len({help_text for _, help_text in engines}) == 1


def test_translate_options_are_translate_config_and_engine_config_fields() -> None:
    params = command_params("translate")
    for cls in (TranslateConfig, EngineConfig):
        for f in (f for f in dataclasses.fields(cls) if f.name in params):
            param = params[f.name]
            help_text = f.metadata["help"]
            if param.default is None:  # the run's recipe decides, and the help says what recipes default to
                assert param.help == f"{help_text} Default: the run's recipe ({f.default}).", f.name
            else:
                assert (param.default, param.help) == (f.default, help_text), f.name
    assert (
        params["dtype"].help
        == command_params("serve")["dtype"].help
        == EngineConfig.__dataclass_fields__["dtype"].metadata["help"]
    )


def test_help_shows_the_dataclass_defaults() -> None:
    serve_help = CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "200"}).stdout
    assert f"[default: {ServeConfig.port}]" in serve_help and f"[default: {ServeConfig.max_bytes}]" in serve_help
    translate_help = CliRunner().invoke(app, ["translate", "--help"], env={"COLUMNS": "200"}).stdout
    assert f"Default: the run's recipe ({TranslateConfig.beam})." in translate_help
    assert f"[default: {TranslateConfig.temperature}]" in translate_help


def test_preprocess_options_are_preprocess_config_fields() -> None:
    """Every preprocess option named after a PreprocessConfig or CleaningConfig field takes its help, and but where it
    sets only what is typed its default, from that field; every field is an option but the recipe keys that name no
    flag, and CleaningConfig's booleans are negatable."""
    params = command_params("preprocess")
    fields = {f.name: f for cls in (PreprocessConfig, CleaningConfig) for f in dataclasses.fields(cls)}
    assert set(fields) - set(params) == {"corpora", "language_tokens", "hf_splits", "cleaning", "seed", "min_len"}
    # What names the corpus sets only what is typed: the recipe's value stands otherwise.
    given = {"source_lang", "target_lang", "train", "valid", "test", "spm_model", "hf_dataset", "hf_config"}
    for f in (f for name, f in fields.items() if name in params):
        default = ([] if f.name == "test" else None) if f.name in given | {"hf_cache_dir"} else f.default
        assert (params[f.name].default, params[f.name].help) == (default, f.metadata["help"]), f.name
    assert params["filter_langid"].opts == ["--filter-langid"] and params["filter_langid"].secondary_opts == [
        "--no-filter-langid"
    ]


def test_train_options_are_train_config_fields() -> None:
    """Each training option sets what is typed only (None otherwise: the recipe's value stands), with its field's
    help; the other TrainConfig fields are recipe keys (--set train.KEY=VALUE)."""
    params = command_params("train")
    names = {"max_time_minutes": "max_time", "tensorboard_dir": "tensorboard"}
    options = [f for f in dataclasses.fields(TrainConfig) if names.get(f.name, f.name) in params]
    assert {f.name for f in options} == {*names, "max_steps", "max_epochs", "log_interval", "init_from"}
    for f in options:
        param = params[names.get(f.name, f.name)]
        assert (param.default, param.help) == (None, f.metadata["help"]), f.name
    assert params["max_time"].opts == ["--max-time"] and params["tensorboard"].opts == ["--tensorboard"]
