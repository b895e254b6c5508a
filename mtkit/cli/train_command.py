"""`mtkit train`: the recipe resolved (mtkit.recipe) and a Transformer trained on DATA_DIR (mtkit.training.loop),
or with --dry-run the resolved configuration printed; registered on the app by mtkit.cli.main. The summary on stdout
(JSON with --json).
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from mtkit.cli.command import emit, user_errors
from mtkit.cli.options import given_option
from mtkit.training.config import TrainConfig


@user_errors
def train(
    data_dir: Path = typer.Argument(..., help="DATA_DIR written by `mtkit preprocess`."),
    save_dir: Path = typer.Option(..., "--save-dir", help="RUN_DIR: checkpoints, config, sentencepiece model."),
    config: Path | None = typer.Option(None, "--config", "-c", help="Recipe TOML."),
    arch: str | None = typer.Option(None, "--arch", help="Model preset: tiny, small, base, big."),
    max_steps: int | None = given_option(TrainConfig, "max_steps"),
    max_epochs: int | None = given_option(TrainConfig, "max_epochs"),
    max_time: float | None = given_option(TrainConfig, "max_time_minutes", "--max-time"),
    log_interval: int | None = given_option(TrainConfig, "log_interval"),
    tensorboard: Path | None = given_option(TrainConfig, "tensorboard_dir", "--tensorboard"),
    init_from: Path | None = given_option(TrainConfig, "init_from"),
    overrides: list[str] = typer.Option([], "--set", help="Override a recipe value: section.key=value (repeatable)."),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Print the resolved configuration; read no data, train nothing."
    ),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """Train a Transformer (resumes when RUN_DIR has checkpoints); works under torchrun."""
    from mtkit.recipe import resolve_recipe

    flags = {
        "max_steps": max_steps,
        "max_epochs": max_epochs,
        "max_time_minutes": max_time,
        "log_interval": log_interval,
        "init_from": str(init_from) if init_from is not None else None,
        "tensorboard_dir": str(tensorboard) if tensorboard is not None else None,
    }
    extra = [f"train.{k}={v!r}" for k, v in flags.items() if v is not None]
    if dry_run:
        from mtkit.training.distributed import training_device
        from mtkit.training.loop import resolve_train_precision

        recipe = resolve_recipe(config, arch, list(overrides) + extra)
        recipe = resolve_train_precision(recipe, training_device(recipe.train.device))  # what auto becomes here
        emit(recipe.as_dict(), as_json, json.dumps(recipe.as_dict(), indent=2))
        return
    from mtkit.corpus.binarized import read_manifest
    from mtkit.training.loop import train as run_train

    manifest = read_manifest(data_dir)
    recipe = resolve_recipe(config, arch, list(overrides) + extra, vocab_size=manifest["vocab_size"])
    summary = run_train(data_dir, save_dir, recipe)
    if summary is not None:
        emit(
            summary,
            as_json,
            f"trained to step {summary['step']} ({summary['stop']}); averaged model: {summary['average']}",
        )
