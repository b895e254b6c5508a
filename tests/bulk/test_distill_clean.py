"""`mtkit clean-distilled`: a distilled corpus whose runaway translations (too long in words, or looping) take
their references, or are dropped without references; the other pairs pass untouched, and mistakes are one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mtkit.bulk.distill_clean import CleanConfig, runaway
from mtkit.errors import UserError
from tests.conftest import run_mtkit_in_process, write_lines

SOURCES = ["A man sleeps.", "Two dogs play in the snow.", "A child.", "A woman reads a book."]
DISTILLED = [
    "Ein Mann schläft.",
    "Zwei Hunde spielen im Schnee Schnee.",  # loop: a word twice in a row
    "Ein Kind mit einem roten Hut und einer Tasche.",  # 10 words from 2
    "Eine Frau liest ein Buch.",
]
REFERENCES = ["Ein Mann schläft.", "Zwei Hunde spielen im Schnee.", "Ein Kind.", "Eine Frau liest ein Buch."]


def test_runaway_names_why() -> None:
    cfg = CleanConfig()
    assert [runaway(cfg, s, t) for s, t in zip(SOURCES, DISTILLED)] == ["", "loop", "long", ""]
    assert runaway(CleanConfig(max_repeats=3), SOURCES[1], DISTILLED[1]) == ""
    assert runaway(CleanConfig(max_ratio=6.0), SOURCES[2], DISTILLED[2]) == ""
    assert runaway(cfg, "Street view of the Orient Hotel.", "Straßenansicht des Oririririels.") == "stutter"
    assert runaway(cfg, "A VW bus.", "Ein VWWWWWW-Bus.") == "stutter"
    assert runaway(cfg, "A ship on the river.", "Ein Schifffahrtsschiff auf dem Fluss.") == ""  # 'f' x3 is German
    with pytest.raises(UserError, match="--max-repeats"):
        CleanConfig(max_repeats=1)


def test_runaways_take_their_references_or_are_dropped(tmp_path: Path) -> None:
    write_lines(tmp_path / "distilled", "en", SOURCES)
    write_lines(tmp_path / "distilled", "de", DISTILLED)
    write_lines(tmp_path / "refs", "de", REFERENCES)
    args = ["clean-distilled", tmp_path / "distilled", "--source-lang", "en", "--target-lang", "de", "--json"]
    done = run_mtkit_in_process(*args, "--references", tmp_path / "refs", "--out", tmp_path / "clean")
    assert done.returncode == 0, done.stderr
    counts = json.loads(done.stdout)
    assert {k: counts[k] for k in ("pairs", "kept", "long", "loop", "replaced", "dropped")} == {
        "pairs": 4, "kept": 4, "long": 1, "loop": 1, "replaced": 2, "dropped": 0
    }  # fmt: skip
    assert (tmp_path / "clean.en").read_text(encoding="utf-8").splitlines() == SOURCES
    assert (tmp_path / "clean.de").read_text(encoding="utf-8").splitlines() == [
        DISTILLED[0], REFERENCES[1], REFERENCES[2], DISTILLED[3]
    ]  # fmt: skip
    dropped = run_mtkit_in_process(*args, "--out", tmp_path / "kept")
    assert dropped.returncode == 0 and json.loads(dropped.stdout)["dropped"] == 2
    assert (tmp_path / "kept.en").read_text(encoding="utf-8").splitlines() == [SOURCES[0], SOURCES[3]]


def test_mistakes_are_one_line_and_write_nothing(tmp_path: Path) -> None:
    write_lines(tmp_path / "distilled", "en", SOURCES)
    write_lines(tmp_path / "distilled", "de", DISTILLED[:3])
    args = ["clean-distilled", tmp_path / "distilled", "--source-lang", "en", "--target-lang", "de"]
    short = run_mtkit_in_process(*args, "--out", tmp_path / "clean")
    assert short.returncode != 0 and "ends at line 3, before" in short.stderr
    assert not (tmp_path / "clean.en").exists() and len(short.stderr.strip().splitlines()) == 1
    missing = run_mtkit_in_process(*args, "--out", tmp_path / "clean", "--references", tmp_path / "nowhere")
    assert missing.returncode != 0 and "nowhere.de: no such file" in missing.stderr
    same = run_mtkit_in_process(*args, "--out", tmp_path / "distilled")
    assert same.returncode != 0 and "would overwrite the distilled corpus" in same.stderr


def scores_file(path: Path, means: list[float | None]) -> Path:
    """score-pairs --json lines with the given means (one piece each, so score = mean)."""
    rows = [{"score": m, "tokens": 1 if m is not None else 0, "mean": m} for m in means]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_the_pairs_the_teacher_scores_worst_take_their_references(tmp_path: Path) -> None:
    """--worst 0.5 of 4 pairs: the two lowest means; a runaway among them counts as a runaway, once."""
    write_lines(tmp_path / "distilled", "en", SOURCES)
    write_lines(tmp_path / "distilled", "de", DISTILLED)
    write_lines(tmp_path / "refs", "de", REFERENCES)
    scores = scores_file(tmp_path / "scores.jsonl", [-0.2, -0.1, -3.0, -2.5])
    args = ["clean-distilled", tmp_path / "distilled", "--source-lang", "en", "--target-lang", "de", "--json"]
    done = run_mtkit_in_process(
        *args, "--references", tmp_path / "refs", "--out", tmp_path / "clean", "--scores", scores, "--worst", "0.5"
    )
    assert done.returncode == 0, done.stderr
    counts = json.loads(done.stdout)
    assert {k: counts[k] for k in ("long", "loop", "worst", "replaced", "kept")} == {
        "long": 1, "loop": 1, "worst": 1, "replaced": 3, "kept": 4
    }  # fmt: skip
    assert (tmp_path / "clean.de").read_text(encoding="utf-8").splitlines() == [
        DISTILLED[0], REFERENCES[1], REFERENCES[2], REFERENCES[3]
    ]  # fmt: skip
    unscored = scores_file(tmp_path / "unscored.jsonl", [None, -0.1, -0.3, -0.2])
    dropped = run_mtkit_in_process(*args, "--out", tmp_path / "kept", "--scores", unscored, "--worst", "0.25")
    assert dropped.returncode == 0 and json.loads(dropped.stdout)["dropped"] == 3  # the unscored line is worst
    assert (tmp_path / "kept.en").read_text(encoding="utf-8").splitlines() == [SOURCES[3]]


def test_scores_that_do_not_fit_are_one_line(tmp_path: Path) -> None:
    write_lines(tmp_path / "distilled", "en", SOURCES)
    write_lines(tmp_path / "distilled", "de", DISTILLED)
    args = ["clean-distilled", tmp_path / "distilled", "--source-lang", "en", "--target-lang", "de"]
    args += ["--out", tmp_path / "clean"]
    few = run_mtkit_in_process(*args, "--scores", scores_file(tmp_path / "few", [-1.0] * 3), "--worst", "0.1")
    assert few.returncode != 0 and "3 scores for 4 pairs" in few.stderr
    (tmp_path / "plain").write_text("-1.5\n" * 4)
    plain = run_mtkit_in_process(*args, "--scores", tmp_path / "plain", "--worst", "0.1")
    assert plain.returncode != 0 and "plain:1: not a line of `mtkit score-pairs --json`" in plain.stderr
    alone = run_mtkit_in_process(*args, "--worst", "0.1")
    assert alone.returncode != 0 and "give --scores" in alone.stderr
    for bad in (few, plain, alone):
        assert len(bad.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "clean.en").exists()
