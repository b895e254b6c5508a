"""Sequence-level distillation (`mtkit distill`, mtkit.bulk.synthetic): the teacher's beam-search translations of the
sources beside the sources as they were, its recipe's beam unless told, an ensemble as `mtkit translate --ensemble`
decodes it; and the student recipes trained on the distilled corpus, end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mtkit.engines.torch_engine import TorchTranslator
from tests.conftest import ROOT, run_mtkit_in_process

STUDENTS = {  # recipe: its model's (d_model, d_ff, encoder_layers, decoder_layers)
    "student.toml": (256, 512, 3, 1),  # of a small.toml teacher
    "student-tiny.toml": (128, 256, 4, 1),  # of teacher.toml
}


def teacher_sources(overfit_data: Path) -> tuple[Path, list[str]]:
    """The 64 English training sources the teacher (overfit_run) memorized, and their German references."""
    raw = overfit_data.parent / f"{overfit_data.name}-raw"
    return raw / "train.en", (raw / "train.de").read_text(encoding="utf-8").splitlines()


def translated(run: Path, source: Path, *options: object) -> list[str]:
    done = run_mtkit_in_process("translate", run, "--device", "cpu", "-q", "-i", source, *options)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_the_teacher_translates_the_sources_with_beam_search(
    overfit_run: Path, overfit_data: Path, tmp_path: Path
) -> None:
    source, references = teacher_sources(overfit_data)
    done = run_mtkit_in_process(
        "distill",
        overfit_run,
        "--input",
        source,
        "--out",
        tmp_path / "distilled",
        "--beam",
        "2",
        "--engine",
        "torch",
        "--device",
        "cpu",
        "--chunk-lines",
        "24",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["read"], summary["search"], summary["engine"]) == (64, "beam 2", "torch")
    assert (tmp_path / "distilled.en").read_bytes() == source.read_bytes()
    distilled = (tmp_path / "distilled.de").read_text(encoding="utf-8").splitlines()
    assert distilled == translated(overfit_run, source, "--beam", "2", "--engine", "torch")
    assert sum(a == b for a, b in zip(distilled, references)) >= 48  # a teacher that memorized its pairs


def test_the_length_penalty_is_the_recipes_unless_given(overfit_run: Path, overfit_data: Path, tmp_path: Path) -> None:
    """--length-penalty (a recipe's may have been chosen after a teacher was trained) ranks the teacher's beam as it
    ranks `mtkit translate`'s; sampling has no use for one and refuses it in one line."""
    source, _ = teacher_sources(overfit_data)
    recipe = TorchTranslator.load(overfit_run).cfg.length_penalty
    assert recipe != 2.5
    for given, expected in ((None, recipe), ("2.5", 2.5)):
        options = ["--length-penalty", given] if given else []
        done = run_mtkit_in_process(
            "distill",
            overfit_run,
            "-i",
            source,
            "-o",
            tmp_path / f"lp-{given}",
            "--beam",
            "2",
            "--engine",
            "torch",
            "--device",
            "cpu",
            "--json",
            *options,
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["length_penalty"] == expected
        assert (tmp_path / f"lp-{given}.de").read_text(encoding="utf-8").splitlines() == translated(
            overfit_run, source, "--beam", "2", "--engine", "torch", *options
        )
    refused = run_mtkit_in_process(
        "back-translate", overfit_run, "-i", source, "-o", tmp_path / "sampled", "--length-penalty", "1.0"
    )
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "--length-penalty" in refused.stderr and not (tmp_path / "sampled.de").exists()


def test_the_recipes_beam_by_default_and_an_ensemble_on_torch(
    overfit_run: Path, overfit_data: Path, tmp_path: Path
) -> None:
    """No --beam: the teacher's recipe's beam (not sampling, as back-translate's default). An ensemble goes to the
    torch engine by default and decodes as `mtkit translate --ensemble`; CTranslate2 refuses one in one line."""
    source, _ = teacher_sources(overfit_data)
    alone = run_mtkit_in_process(
        "distill", overfit_run, "-i", source, "-o", tmp_path / "alone", "--engine", "torch", "--device", "cpu", "--json"
    )
    assert alone.returncode == 0, alone.stderr
    assert json.loads(alone.stdout)["search"] == f"beam {TorchTranslator.load(overfit_run).cfg.beam}"
    assert (tmp_path / "alone.de").read_text(encoding="utf-8").splitlines() == translated(
        overfit_run, source, "--engine", "torch"
    )

    both = run_mtkit_in_process(
        "distill",
        overfit_run,
        "--ensemble",
        overfit_run,
        "-i",
        source,
        "-o",
        tmp_path / "both",
        "--device",
        "cpu",
        "--json",
    )
    assert both.returncode == 0, both.stderr
    assert json.loads(both.stdout)["engine"] == "torch"
    assert (tmp_path / "both.de").read_text(encoding="utf-8").splitlines() == translated(
        overfit_run, source, "--ensemble", overfit_run
    )
    refused = run_mtkit_in_process(
        "distill",
        overfit_run,
        "--ensemble",
        overfit_run,
        "--engine",
        "ctranslate2",
        "-i",
        source,
        "-o",
        tmp_path / "ct2",
    )
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "--ensemble" in refused.stderr and not (tmp_path / "ct2.de").exists()


@pytest.mark.parametrize("recipe", sorted(STUDENTS))
def test_a_student_recipe_trains_on_the_distilled_corpus(
    recipe: str, overfit_run: Path, overfit_data: Path, tmp_path: Path
) -> None:
    """distill -> preprocess and train with a student recipe (a few updates) -> translate: the student's data is the
    teacher's output, and its model is the recipe's shape."""
    student = ROOT / "recipes" / "multi30k-en-de" / recipe
    source, _ = teacher_sources(overfit_data)
    raw = source.parent
    prefix = tmp_path / "distilled"
    assert run_mtkit_in_process("distill", overfit_run, "-i", source, "-o", prefix, "--device", "cpu").returncode == 0
    for lang in ("en", "de"):  # a test set of its own name (the recipe's is the shipped test_2016_flickr)
        (tmp_path / f"heldout.{lang}").write_bytes((raw / f"valid.{lang}").read_bytes())
    data, run = tmp_path / "student-data", tmp_path / "student"
    done = run_mtkit_in_process(
        "preprocess",
        "--config",
        student,
        "--train",
        prefix,
        "--valid",
        raw / "valid",
        "--test",
        tmp_path / "heldout",
        "--spm-model",
        overfit_data / "spm.model",
        "--out",
        data,
    )
    assert done.returncode == 0, done.stderr
    manifest = json.loads((data / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["splits"]["train"]["input_pairs"] == 64
    done = run_mtkit_in_process(
        "train",
        data,
        "--save-dir",
        run,
        "--config",
        student,
        "--max-steps",
        "3",
        "--max-time",
        "0",
        "--set",
        "train.max_tokens=512",
        "--set",
        "train.warmup_steps=2",
        "--set",
        "train.save_interval_minutes=0",
        "--set",
        "train.save_interval_steps=3",
        "--set",
        "train.average_last=1",
    )
    assert done.returncode == 0, done.stderr
    steps = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert max(record.get("step", 0) for record in steps) == 3
    shape = TorchTranslator.load(run).model_cfg
    assert (shape.d_model, shape.d_ff, shape.encoder_layers, shape.decoder_layers) == STUDENTS[recipe]
    assert len(translated(run, source, "--max-len-b", "5")) == 64
