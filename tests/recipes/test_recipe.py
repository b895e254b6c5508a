"""Recipes resolve to the paper's numbers; unknown keys and mistyped overrides are refused."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from mtkit.corpus.config import CleaningConfig, CorpusConfig, PreprocessConfig, corpus_configs
from mtkit.corpus.modifiers import ModifiersConfig
from mtkit.corpus.term_hints import TermHintsConfig
from mtkit.errors import UserError
from mtkit.model.transformer import ModelConfig
from mtkit.recipe import SECTIONS, parse_override, resolve_recipe
from mtkit.search.config import TranslateConfig
from mtkit.training.config import TrainConfig
from tests.conftest import ROOT

RECIPES = ROOT / "recipes"
PAPER = {
    # recipe: (d_model, n_heads, d_ff, dropout, max_steps, average_last, vocab)
    "wmt14-en-de/base.toml": (512, 8, 2048, 0.1, 100_000, 5, 37000),
    "wmt14-en-de/big.toml": (1024, 16, 4096, 0.3, 300_000, 20, 37000),
    "wmt14-en-fr/base.toml": (512, 8, 2048, 0.1, 100_000, 5, 32000),
    "wmt14-en-fr/big.toml": (1024, 16, 4096, 0.1, 300_000, 20, 32000),
}


def run_in_process(*args: str) -> tuple[int, str, str]:
    """`mtkit ARGS` in this process (CliRunner): (exit code, stdout, stderr). What a real process adds (exit status,
    stderr without a traceback) is proved once by test_cli_bad_recipe_is_one_line."""
    from typer.testing import CliRunner

    from mtkit.cli.main import app

    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def dry_run(recipe: Path, *extra: str) -> dict:
    code, out, err = run_in_process(
        "train", "unused-data", "--save-dir", "unused-run", "--config", str(recipe), "--dry-run", "--json", *extra
    )
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize("name", sorted(PAPER))
def test_wmt_recipes_match_the_paper(name: str) -> None:
    d_model, heads, d_ff, dropout, steps, average, vocab = PAPER[name]
    cfg = dry_run(RECIPES / name)
    model, train, translate = cfg["model"], cfg["train"], cfg["translate"]
    assert (model["d_model"], model["n_heads"], model["d_ff"]) == (d_model, heads, d_ff)
    assert (model["encoder_layers"], model["decoder_layers"], model["dropout"]) == (6, 6, dropout)
    assert model["share_embeddings"] == "all" and model["vocab_size"] == vocab
    assert train["label_smoothing"] == 0.1 and train["adam_betas"] == [0.9, 0.98] and train["adam_eps"] == 1e-9
    assert train["warmup_steps"] == 4000 and train["max_steps"] == steps and train["average_last"] == average
    assert train["lr"] == pytest.approx(d_model**-0.5 * 4000**-0.5)  # the paper's formula at its peak
    assert train["max_tokens"] * train["update_freq"] == 25_000  # ~25k source + 25k target tokens per update
    # Saved by steps, the paper's 10 minutes on 8 P100s (~1,400 base / ~600 big updates), so that the averaged
    # window is the paper's share of training (7% base, 4% big) on any hardware; no time-based save inside it.
    assert train["save_interval_steps"] == {100_000: 1400, 300_000: 600}[steps] and train["save_interval_minutes"] == 0
    assert 0.04 <= train["save_interval_steps"] * average / steps <= 0.07
    assert (translate["beam"], translate["length_penalty"], translate["max_len_a"], translate["max_len_b"]) == (
        4,
        0.6,
        1.0,
        50,
    )
    assert cfg["preprocess"]["hf_dataset"] == "wmt/wmt14"


def test_teacher_recipe_is_wu_2021_transformer_tiny() -> None:
    """recipes/multi30k-en-de/teacher.toml has Wu et al. 2021's sizes and schedule, stops at its update count (so a
    stopped run goes on), and averages the last 5 of its checkpoints saved every 500 updates."""
    cfg = dry_run(RECIPES / "multi30k-en-de/teacher.toml")
    model, train = cfg["model"], cfg["train"]
    assert (model["d_model"], model["n_heads"], model["d_ff"], model["encoder_layers"], model["decoder_layers"]) == (
        128,
        4,
        256,
        4,
        4,
    )
    assert model["dropout"] == 0.3 and model["norm"] == "post" and model["share_embeddings"] == "all"
    assert (train["lr"], train["warmup_steps"], train["max_tokens"], train["max_steps"]) == (5e-3, 2000, 4096, 8000)
    assert train["max_time_minutes"] == 0 and train["save_interval_minutes"] == 0
    assert (train["save_interval_steps"], train["average_last"]) == (500, 5)
    assert cfg["preprocess"]["train"] == "data/multi30k/train"


def test_tiny_student_recipe_is_the_teacher_with_one_decoder_layer() -> None:
    """recipes/multi30k-en-de/student-tiny.toml differs from the teacher it distils only in the decoder's depth and
    in its training data (the teacher's translations), so that a comparison of the two is about those alone."""
    teacher = dry_run(RECIPES / "multi30k-en-de/teacher.toml")
    student = dry_run(RECIPES / "multi30k-en-de/student-tiny.toml")
    assert (teacher["model"]["decoder_layers"], student["model"]["decoder_layers"]) == (4, 1)
    assert {**student["model"], "decoder_layers": 4} == teacher["model"]
    assert student["train"] == teacher["train"] and student["translate"] == teacher["translate"]
    assert student["preprocess"]["train"] == "runs/distilled"
    assert {**student["preprocess"], "train": teacher["preprocess"]["train"]} == teacher["preprocess"]


def test_ensemble_students_are_the_teachers_shape_and_a_deep_encoder_shallow_decoder() -> None:
    """The students of the teachers' ensemble: one in the teacher's own shape and schedule, one with a 6-layer
    encoder, a 1-layer decoder and a wider FFN; both on the cleaned distilled corpus and the references, weighted
    alike."""
    teacher = dry_run(RECIPES / "multi30k-en-de/teacher.toml")
    same = dry_run(RECIPES / "multi30k-en-de/student-ensemble.toml")
    deep = dry_run(RECIPES / "multi30k-en-de/student-ensemble-deep.toml")
    assert same["model"] == teacher["model"] and same["train"] == teacher["train"]
    assert {**deep["model"], "d_ff": 256, "encoder_layers": 4, "decoder_layers": 4} == teacher["model"]
    assert (deep["model"]["d_ff"], deep["model"]["encoder_layers"], deep["model"]["decoder_layers"]) == (512, 6, 1)
    for student in (same, deep):
        corpora = {c["name"]: (c["train"], c["weight"]) for c in student["preprocess"]["corpora"]}
        assert corpora == {
            "distilled": ("runs/ensemble-distilled-clean", 1.0),
            "references": ("data/multi30k/train", 1.0),
        }


def test_dry_run_names_and_overrides() -> None:
    cfg = dry_run(RECIPES / "multi30k-en-de/small.toml", "--set", "train.lr=7e-4", "--max-steps", "300")
    for section, key in [
        ("model", "d_model"),
        ("model", "n_heads"),
        ("model", "d_ff"),
        ("model", "encoder_layers"),
        ("model", "decoder_layers"),
        ("model", "dropout"),
        ("model", "share_embeddings"),
        ("train", "label_smoothing"),
        ("train", "precision"),
        ("train", "lr"),
        ("train", "warmup_steps"),
        ("train", "adam_betas"),
        ("train", "adam_eps"),
        ("train", "max_tokens"),
        ("train", "update_freq"),
        ("train", "max_steps"),
        ("train", "save_interval_steps"),
        ("train", "save_interval_minutes"),
        ("train", "average_last"),
        ("translate", "beam"),
        ("translate", "length_penalty"),
        ("translate", "max_len_a"),
        ("translate", "max_len_b"),
    ]:
        assert key in cfg[section], f"{section}.{key}"
    assert cfg["train"]["lr"] == 7e-4 and cfg["train"]["max_steps"] == 300
    assert (cfg["model"]["d_model"], cfg["model"]["n_heads"], cfg["model"]["d_ff"]) == (256, 4, 1024)


def test_unknown_key_lists_valid_ones(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[train]\nlearning_rate = 1.0\n")
    with pytest.raises(UserError, match="unknown key train.learning_rate; valid keys: .*warmup_steps"):
        resolve_recipe(bad)
    with pytest.raises(UserError, match="expected int"):
        resolve_recipe(None, "tiny", ["train.max_steps=1.5"])
    with pytest.raises(UserError, match="unknown section"):
        parse_override("optim.lr=1")
    assert parse_override("model.norm=pre") == ("model", "norm", "pre")
    assert resolve_recipe(None, "tiny", ["train.adam_betas=(0.9, 0.997)"]).train.adam_betas == (0.9, 0.997)


# Each section's config, and the configs whose keys stand in a section: CleaningConfig's flat in [preprocess] and in
# each [[preprocess.corpora]] table, CorpusConfig's in those tables.
SECTION_CONFIGS = {
    "preprocess": PreprocessConfig,
    "model": ModelConfig,
    "train": TrainConfig,
    "translate": TranslateConfig,
    "modifiers": ModifiersConfig,
    "term_hints": TermHintsConfig,
}


@pytest.mark.parametrize("cls", [*SECTION_CONFIGS.values(), CleaningConfig, CorpusConfig], ids=lambda cls: cls.__name__)
def test_every_recipe_key_has_a_help_text(cls: type) -> None:
    """Each key of a recipe says what it sets in its field's metadata "help", as the CLI's options read it."""
    assert set(SECTION_CONFIGS) == set(SECTIONS)
    assert [f.name for f in dataclasses.fields(cls) if not f.metadata.get("help")] == []


def test_cli_bad_recipe_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[train\n")
    run = subprocess.run(
        [sys.executable, "-m", "mtkit", "train", "d", "--save-dir", "r", "--config", str(bad), "--dry-run"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 2 and "bad.toml: invalid TOML" in run.stderr and "Traceback" not in run.stderr


@pytest.mark.parametrize(
    "override, message",
    [
        ("model.d_model=-1", "model.d_model must be at least 1; got -1"),
        ("model.dropout=1.0", "model.dropout must be in [0, 1); got 1.0"),
        ("train.log_interval=0", "train.log_interval must be at least 1, got 0"),
        (
            "train.lr_schedule=step",
            "train.lr_schedule must be one of inverse_sqrt, noam, linear, cosine, wsd, got 'step'",
        ),
        (
            "train.lr_schedule=linear",
            "train.lr_schedule = 'linear' ends with the budget, and there is none: set train.max_steps or "
            "train.max_time_minutes (--max-steps, --max-time)",
        ),
        ("translate.beam=0", "translate.beam must be at least 1; got 0"),
        ("translate.top_p=1.5", "translate.top_p must be in (0, 1]; got 1.5"),
    ],
)
def test_a_bad_value_is_one_line_naming_its_key(override: str, message: str) -> None:
    code, _, err = run_in_process("train", "d", "--save-dir", "r", "--set", override, "--dry-run")
    assert code == 2 and err.strip().splitlines() == [f"error: {message}"], err


# ---- [preprocess]: `mtkit preprocess --config RECIPE` -------------------------------------------------------


def run_preprocess_cli(*args: str) -> tuple[int, str, str]:
    """`mtkit preprocess ARGS` in this process: (exit code, stdout, stderr)."""
    return run_in_process("preprocess", *args)


@pytest.fixture(scope="module")
def slices(tmp_path_factory: pytest.TempPathFactory, multi30k: Path) -> dict[str, str]:
    """300 train / 50 valid Multi30k pairs as plain files."""
    from tests.conftest import write_slice

    raw = tmp_path_factory.mktemp("raw")
    return {
        "train": str(write_slice(multi30k, "train", raw / "train", 300)),
        "valid": str(write_slice(multi30k, "val", raw / "valid", 50)),
    }


def test_preprocess_takes_the_recipe_and_only_the_options_given(
    tmp_path: Path, slices: dict, multi30k_spm: Path
) -> None:
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(
        f'[preprocess]\nsource_lang = "en"\ntarget_lang = "de"\ntrain = "{slices["train"]}"\n'
        f'valid = "{slices["valid"]}"\n'
        f'spm_model = "{multi30k_spm}"\nmax_len = 20\nmax_ratio = 1.5\ndedup = true\nmin_len = 2\n'
        '[model]\narch = "tiny"\n[train]\nmax_steps = 3\n'
    )
    code, out, err = run_preprocess_cli("--config", str(recipe), "--out", str(tmp_path / "a"), "--json")
    assert code == 0, err
    options = json.loads(out)["options"]
    assert (options["max_len"], options["max_ratio"], options["dedup"], options["min_len"]) == (20, 1.5, True, 2)
    assert options["train"] == slices["train"] and options["spm_model"] == str(multi30k_spm)
    # Options typed on the command line win, even when they spell a default (9.0, --no-dedup); the others stay.
    code, out, err = run_preprocess_cli(
        "--config", str(recipe), "--out", str(tmp_path / "b"), "--json", "--max-ratio", "9.0", "--no-dedup"
    )
    assert code == 0, err
    options = json.loads(out)["options"]
    assert (options["max_len"], options["max_ratio"], options["dedup"], options["min_len"]) == (20, 9.0, False, 2)
    assert json.loads((tmp_path / "b" / "manifest.json").read_text())["splits"]["train"]["dropped"]["ratio"] == 0
    # The same recipe, [preprocess] included, still drives `mtkit train`.
    assert dry_run(recipe)["preprocess"]["max_ratio"] == 1.5


def test_files_on_the_command_line_replace_the_recipes_corpus(tmp_path: Path, slices: dict, multi30k_spm: Path) -> None:
    """The WMT recipe names a Hub corpus; --train/--valid files are read instead of it, with its cleaning."""
    code, out, err = run_preprocess_cli(
        "--config",
        str(RECIPES / "wmt14-en-de/base.toml"),
        "--train",
        slices["train"],
        "--valid",
        slices["valid"],
        "--spm-model",
        str(multi30k_spm),
        "--out",
        str(tmp_path / "data"),
        "--json",
    )
    assert code == 0, err
    manifest = json.loads(out)
    assert manifest["options"]["hf_dataset"] is None and manifest["options"]["max_ratio"] == 1.5
    assert set(manifest["splits"]) == {"train", "valid"} and manifest["splits"]["valid"]["pairs"] == 50
    assert "hf_dataset" in err and "not used" in err


@pytest.mark.parametrize("name", ["multi30k-en-de/small.toml", *sorted(PAPER)])
def test_every_recipe_describes_its_data(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from mtkit.files import resolve_prefix
    from mtkit.recipe import resolve_preprocess

    monkeypatch.chdir(RECIPES.parent)  # recipe paths are relative to where mtkit runs: the repository root
    cfg = resolve_preprocess(RECIPES / name, {})
    assert cfg.source_lang == "en" and cfg.target_lang == name.split("/")[0].split("-")[-1]
    if cfg.hf_dataset is None:
        for prefix in [cfg.train, cfg.valid, *cfg.test]:
            assert resolve_prefix(prefix, "en").is_file() and resolve_prefix(prefix, "de").is_file()
    else:
        assert cfg.hf_config == f"{cfg.target_lang}-en" and cfg.cleaning.max_ratio == 1.5


def test_bad_preprocess_sections_are_one_line_errors(tmp_path: Path) -> None:
    from mtkit.recipe import resolve_preprocess

    bad = tmp_path / "bad.toml"
    bad.write_text('[preprocess]\nsource_lang = "en"\ntarget_lang = "de"\nvocab = 8000\n')
    code, _, err = run_preprocess_cli("--config", str(bad), "--out", str(tmp_path / "out"))
    cleaning = [f.name for f in dataclasses.fields(CleaningConfig)]
    keys = [
        key for f in dataclasses.fields(PreprocessConfig) for key in (cleaning if f.name == "cleaning" else [f.name])
    ]
    assert code == 2 and err.strip().splitlines() == [
        "error: unknown key preprocess.vocab; valid keys: " + ", ".join(keys)
    ]
    code, _, err = run_in_process("train", "d", "--save-dir", "r", "--config", str(bad), "--dry-run")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "error: unknown key preprocess.vocab" in err, err
    bad.write_text('[preprocess]\nsource_lang = "en"\ntarget_lang = "de"\nmax_len = "long"\n')
    with pytest.raises(UserError, match="preprocess.max_len: expected int"):
        resolve_preprocess(bad, {})
    with pytest.raises(UserError, match="no languages"):
        resolve_preprocess(None, {"train": "x"})
    assert not (tmp_path / "out").exists()


def test_cleaning_keys_stand_flat_in_the_section_and_in_each_corpus(tmp_path: Path) -> None:
    """[preprocess]'s max_len, dedup, ... are the run's CleaningConfig (the command line's over them); a corpus's
    table sets its own over the run's, key by key; `cleaning` itself is no key."""
    from mtkit.recipe import resolve_preprocess

    recipe = tmp_path / "recipe.toml"
    recipe.write_text(
        '[preprocess]\nsource_lang = "en"\nmax_len = 40\nmax_ratio = 3\ndedup = true\n'
        '[[preprocess.corpora]]\nname = "a"\ntrain = "x"\ntarget_lang = "de"\nfilter_scripts = false\n'
        '[[preprocess.corpora]]\nname = "b"\ntrain = "y"\ntarget_lang = "fr"\nmax_len = 12\n'
    )
    cfg = resolve_preprocess(recipe, {"max_ratio": 2.0})
    assert cfg.cleaning == CleaningConfig(max_len=40, max_ratio=2.0, dedup=True)
    a, b = corpus_configs(cfg)
    assert a.cleaning == dataclasses.replace(cfg.cleaning, filter_scripts=False)
    assert b.cleaning == dataclasses.replace(cfg.cleaning, max_len=12)
    recipe.write_text('[preprocess]\nsource_lang = "en"\ntarget_lang = "de"\n[preprocess.cleaning]\nmax_len = 40\n')
    with pytest.raises(UserError, match="^unknown key preprocess.cleaning; valid keys: .*, max_len, "):
        resolve_preprocess(recipe, {})


def test_a_bad_cleaning_value_is_one_line_naming_its_key(tmp_path: Path) -> None:
    given = ("-s", "en", "-t", "de", "--train", str(tmp_path / "x"), "--max-ratio", "0.5", "--out", str(tmp_path / "o"))
    code, _, err = run_preprocess_cli(*given)
    assert code == 2 and err.strip().splitlines() == ["error: preprocess.max_ratio must be >= 1, got 0.5"], err
    recipe = tmp_path / "recipe.toml"
    recipe.write_text(
        '[preprocess]\nsource_lang = "en"\ntarget_lang = "de"\nmax_len = 20\n'
        '[[preprocess.corpora]]\nname = "a"\ntrain = "x"\nmin_len = 30\n'
    )
    code, _, err = run_preprocess_cli("--config", str(recipe), "--out", str(tmp_path / "out"))
    assert code == 2 and err.strip().splitlines() == [
        "error: corpus a: min_len must be at least 1 and at most max_len (20), got 30"
    ], err
    assert not (tmp_path / "out").exists()
