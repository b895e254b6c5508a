"""Dual conditional cross-entropy filtering: the score by hand, the selection rules, resumable outputs, and
`mtkit filter-pairs` on real Multi30k pairs with an en->de and a de->en model, equal to forced scoring's figures."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest

from mtkit.bulk.resumable import ResumableOutputs
from mtkit.bulk.xent_filter import dual_score, read_scores, score_corpus, select
from mtkit.errors import UserError
from tests.conftest import read_gz_lines, run_mtkit_in_process
from tests.serve.test_app import MTKIT


def test_dual_score_by_hand() -> None:
    assert dual_score(1.0, 3.0) == pytest.approx(math.exp(-(2.0 + 2.0)))
    assert dual_score(0.5, 0.5) == pytest.approx(math.exp(-0.5))
    assert dual_score(2.0, 2.0) < dual_score(1.0, 1.0)  # improbable in both directions
    assert dual_score(0.5, 2.5) < dual_score(1.5, 1.5)  # same mean, the models disagree


def test_selection_by_fraction_or_threshold_never_keeps_a_pair_without_a_score() -> None:
    scores = [0.2, None, 0.9, 0.5, 0.5, 0.1]
    assert select(scores, keep=0.5).kept == [False, False, True, True, True, False]  # 3 of 6; no score never kept
    by_fraction = select(scores, keep=0.34)  # int(0.34 * 6) = 2: the tie at 0.5 goes to the earlier pair
    assert by_fraction.kept == [False, False, True, True, False, False] and by_fraction.cutoff == 0.5
    assert select(scores, threshold=0.2).kept == [True, False, True, True, True, False]
    assert select(scores, threshold=0.95).counts == {"pairs": 6, "kept": 0, "dropped": 6}
    for bad in ({}, {"keep": 0.5, "threshold": 0.1}, {"keep": 0.0}, {"keep": 1.5}):
        with pytest.raises(UserError):
            select(scores, **bad)


def test_resumable_outputs_truncate_a_cut_chunk_and_refuse_another_job(tmp_path: Path) -> None:
    out, state = tmp_path / "out.txt", tmp_path / "out.progress.json"
    first = ResumableOutputs(state, [out], {"input": "a"})
    first.append(["one\ntwo\n"], 2)
    with open(out, "ab") as handle:  # killed after appending the next chunk, before recording it
        handle.write(b"three\nfo")
    again = ResumableOutputs(state, [out], {"input": "a"})
    assert again.done == 2 and out.read_bytes() == b"one\ntwo\n"
    with pytest.raises(UserError, match="other input wrote these outputs.*--overwrite"):
        ResumableOutputs(state, [out], {"input": "b"})
    assert ResumableOutputs(state, [out], {"input": "b"}, overwrite=True).done == 0 and out.read_bytes() == b""
    again.finish()
    assert not state.exists()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory, multi30k: Path) -> tuple[Path, Path]:
    """The 64 train pairs overfit_run and de_en_run memorized, the last 14 with the target of another sentence."""
    folder = tmp_path_factory.mktemp("filter")
    en, de = read_gz_lines(multi30k / "train.en.gz", 64), read_gz_lines(multi30k / "train.de.gz", 64)
    de = de[:50] + de[51:64] + de[50:51]  # the last 14 targets shifted by one line
    (folder / "corpus.en").write_text("\n".join(en) + "\n", encoding="utf-8")
    (folder / "corpus.de").write_text("\n".join(de) + "\n", encoding="utf-8")
    return folder / "corpus.en", folder / "corpus.de"


def test_scoring_killed_between_chunks_goes_on_to_the_same_scores(
    overfit_run: Path, de_en_run: Path, corpus: tuple[Path, Path], tmp_path: Path
) -> None:
    from mtkit.engines.config import EngineConfig
    from mtkit.engines.factory import load_translator

    forward, backward = (
        load_translator(overfit_run, EngineConfig(engine="torch", device="cpu")),
        load_translator(de_en_run, EngineConfig(engine="torch", device="cpu")),
    )
    whole, _ = score_corpus(forward, backward, *corpus, tmp_path / "whole", chunk=16)

    seen: list[int] = []

    def stop_after_two(pairs: int) -> None:
        seen.append(pairs)
        if len(seen) == 2:
            raise KeyboardInterrupt  # as a kill after the second chunk was recorded

    with pytest.raises(KeyboardInterrupt):
        score_corpus(forward, backward, *corpus, tmp_path / "cut", chunk=16, on_chunk=stop_after_two)
    with open(tmp_path / "cut.scores.tsv", "a", encoding="utf-8") as handle:
        handle.write("0.5\t1.0\t")  # and a third chunk cut half-way
    resumed_file, resumed = score_corpus(forward, backward, *corpus, tmp_path / "cut", chunk=16)
    assert resumed == 32 and resumed_file.read_bytes() == whole.read_bytes()
    assert len(read_scores(whole)) == 64


def test_filter_pairs_keeps_the_best_and_its_scores_are_forced_scorings(
    overfit_run: Path, de_en_run: Path, corpus: tuple[Path, Path], tmp_path: Path
) -> None:
    source, target = corpus
    done = run_mtkit_in_process(
        "filter-pairs",
        "--forward",
        overfit_run,
        "--backward",
        de_en_run,
        "--source",
        source,
        "--target",
        target,
        "--out",
        tmp_path / "kept",
        "--keep",
        "0.75",
        "--json",
        "--device",
        "cpu",
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["pairs"], summary["kept"], summary["unscored"]) == (64, 48, 0)
    rows = [line.split("\t") for line in (tmp_path / "kept.scores.tsv").read_text().splitlines()]

    def forced(model: Path, src: Path, tgt: Path) -> list[dict]:
        run = subprocess.run(
            [
                str(MTKIT),
                "score-pairs",
                str(model),
                "--source",
                str(src),
                "--target",
                str(tgt),
                "--json",
                "--engine",
                "ctranslate2",
                "--device",
                "cpu",
            ],
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        )
        return [json.loads(line) for line in run.stdout.splitlines()]

    for row, ahead, back in zip(rows, forced(overfit_run, source, target), forced(de_en_run, target, source)):
        assert float(row[1]) == pytest.approx(-ahead["mean"], abs=2e-6)
        assert float(row[2]) == pytest.approx(-back["mean"], abs=2e-6)
        assert float(row[0]) == pytest.approx(dual_score(-ahead["mean"], -back["mean"]), rel=1e-5)
    scores = [float(row[0]) for row in rows]
    kept_en = (tmp_path / "kept.en").read_text().splitlines()
    kept_de = (tmp_path / "kept.de").read_text().splitlines()
    expected = sorted(range(64), key=lambda i: (-scores[i], i))[:48]
    lines_en, lines_de = source.read_text().splitlines(), target.read_text().splitlines()
    assert kept_en == [lines_en[i] for i in sorted(expected)] and kept_de == [lines_de[i] for i in sorted(expected)]
    # Both models learned these pairs: every pair whose target belongs to another sentence is dropped.
    assert max(scores[50:]) < min(scores[:50]) and sorted(expected) == [i for i in range(50) if i in expected]
    assert not (tmp_path / "kept.progress.json").exists()


def test_filter_pairs_asks_a_multilingual_forward_model_for_the_target_language(
    en_de_fr_run: Path, de_en_run: Path, corpus: tuple[Path, Path], tmp_path: Path
) -> None:
    source, target = corpus
    common = (
        "--backward",
        de_en_run,
        "--source",
        source,
        "--target",
        target,
        "--keep",
        "0.5",
        "--json",
        "--device",
        "cpu",
        "--engine",
        "torch",
    )
    done = run_mtkit_in_process(
        "filter-pairs", "--forward", en_de_fr_run, "--target-lang", "de", "--out", tmp_path / "kept", *common
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["kept"] == 32 and (tmp_path / "kept.de").is_file()
    scored = run_mtkit_in_process(
        "score-pairs",
        en_de_fr_run,
        "--target-lang",
        "de",
        "--source",
        source,
        "--target",
        target,
        "--json",
        "--engine",
        "torch",
        "--device",
        "cpu",
    )
    ahead = [-json.loads(line)["mean"] for line in scored.stdout.splitlines()]
    rows = [line.split("\t") for line in (tmp_path / "kept.scores.tsv").read_text().splitlines()]
    assert [float(row[1]) for row in rows] == pytest.approx(ahead, abs=2e-6)

    missing = run_mtkit_in_process("filter-pairs", "--forward", en_de_fr_run, "--out", tmp_path / "none", *common)
    assert missing.returncode == 2 and "--forward translates into de, fr: give --target-lang" in missing.stderr
    wrong = run_mtkit_in_process(
        "filter-pairs", "--forward", en_de_fr_run, "--target-lang", "fr", "--out", tmp_path / "fr", *common
    )
    assert wrong.returncode == 2 and "--backward translates de->en; the corpus is en->fr" in wrong.stderr
    assert not (tmp_path / "none.scores.tsv").exists() and not (tmp_path / "fr.scores.tsv").exists()
