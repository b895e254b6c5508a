"""A run directory written by an earlier mtkit still loads and translates byte for byte as it did then.

tests/data/run-0681275 is a tiny model (the `tiny` preset, 500 updates on 6,000 Multi30k pairs, vocabulary 600)
trained by mtkit at commit 0681275, before the package was regrouped into subpackages; expected/ holds what that
commit printed for the first 40 test_2016_flickr sources. Those outputs were the same on the AVX-512 and the
forced-AVX2 kernels and at 1 and 2 threads (AMD EPYC, 2026-11-26); printed scores are compared within 1e-3.
Since 2026-11-28 a line's best is guarded by default (`--no-guard` gives the raw model's, as that commit printed it).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import run_mtkit_in_process

OLD_RUN = Path(__file__).resolve().parent / "data" / "run-0681275"
EXPECTED = OLD_RUN / "expected"


@pytest.fixture
def old_run(tmp_path: Path) -> Path:
    """A copy of the old run: the CTranslate2 engine writes its cached export into the run directory."""
    run = tmp_path / "run"
    shutil.copytree(OLD_RUN, run, ignore=shutil.ignore_patterns("expected"))
    return run


@pytest.mark.exactness
@pytest.mark.parametrize(
    "name, options",
    [
        ("beam4", ["--no-guard"]),
        ("greedy", ["--beam", "1", "--no-guard"]),
        ("nbest", ["--nbest", "2", "--scores"]),
    ],
)
def test_an_old_run_translates_as_it_did(old_run: Path, name: str, options: list[str]) -> None:
    result = run_mtkit_in_process("translate", old_run, "-i", EXPECTED / "input.en", *options)
    assert result.returncode == 0, result.stderr
    assert_same_output(result.stdout, (EXPECTED / f"{name}.de").read_text(encoding="utf-8"))


@pytest.mark.exactness
def test_the_guard_changes_the_lines_it_counts_and_answers_as_split_sentences(old_run: Path) -> None:
    """Guarded by default, the old run's output is its raw one but for the lines the guard's summary counts (this
    tiny model retries one and tames one runaway of 40), and each line is what --split-sentences gives it."""
    result = run_mtkit_in_process("translate", old_run, "-i", EXPECTED / "input.en")
    split = run_mtkit_in_process("translate", old_run, "-i", EXPECTED / "input.en", "--split-sentences", "-q")
    assert result.returncode == split.returncode == 0, result.stderr + split.stderr
    raw = (EXPECTED / "beam4.de").read_text(encoding="utf-8").splitlines()
    changed = sum(a != b for a, b in zip(result.stdout.splitlines(), raw, strict=True))
    assert "40 sentences, 1 retried, 0 kept, 1 tamed" in result.stderr
    assert changed == 2
    assert result.stdout == split.stdout


def assert_same_output(found: str, expected: str) -> None:
    """The same lines, byte for byte, but for the printed scores (INDEX, RANK, SCORE, TEXT rows): those are compared
    within 1e-3, since another CPU's kernels may move a score's last printed digit (this machine's never did)."""
    if "\t" not in expected:
        assert found == expected
        return
    rows = [line.split("\t") for line in found.splitlines()]
    wanted = [line.split("\t") for line in expected.splitlines()]
    assert [row[:2] + row[3:] for row in rows] == [row[:2] + row[3:] for row in wanted]
    assert [float(row[2]) for row in rows] == pytest.approx([float(row[2]) for row in wanted], abs=1e-3)


@pytest.mark.exactness
def test_an_old_run_exports_to_ctranslate2_and_translates_as_it_did(old_run: Path) -> None:
    pytest.importorskip("ctranslate2")
    result = run_mtkit_in_process(
        "translate", old_run, "--engine", "ctranslate2", "--no-guard", "-i", EXPECTED / "input.en"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == (EXPECTED / "ct2.de").read_text(encoding="utf-8")


def test_an_old_data_manifests_options_read_back_and_are_written_as_they_were() -> None:
    """The options the run's data recorded at 0681275 (the cleaning keys flat among the others) build today's
    PreprocessConfig, and today's preprocess would record them key for key, in the same order."""
    from mtkit.corpus.config import PreprocessConfig, manifest_options
    from mtkit.recipe import build_config

    old = json.loads((OLD_RUN / "manifest.json").read_text(encoding="utf-8"))["options"]
    cfg = build_config(PreprocessConfig, old, "preprocess")
    assert (cfg.cleaning.max_len, cfg.cleaning.filter_scripts, cfg.vocab_size) == (
        old["max_len"],
        old["filter_scripts"],
        old["vocab_size"],
    )
    assert list(manifest_options(cfg).items()) == list(old.items())
