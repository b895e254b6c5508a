"""Forced scoring (mtkit.bulk.forced, `mtkit score-pairs`): the sum of the log-probabilities the model gives a target,
as the search adds them up, with either engine; answers for every pair, in order, never shifted."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mtkit.bulk.forced import read_pairs, score_pairs
from mtkit.engines.torch_engine import TorchTranslator
from tests.conftest import read_gz_lines, run_mtkit_in_process

MTKIT = (sys.executable, "-m", "mtkit")


@pytest.fixture(scope="module")
def pairs(multi30k: Path) -> tuple[list[str], list[str]]:
    return read_gz_lines(multi30k / "test_2016_flickr.en.gz", 40), read_gz_lines(
        multi30k / "test_2016_flickr.de.gz", 40
    )


def test_a_hypothesis_scores_what_the_search_gave_it(tiny_run: Path, pairs: tuple[list[str], list[str]]) -> None:
    """Scoring the search's own best hypotheses gives back their log-probabilities (eos included)."""
    translator = TorchTranslator.load(tiny_run, device="cpu", length_penalty=0.0)
    ids = translator.encode_lines(pairs[0])
    best = [hyps[0] for hyps in translator.search_ids(ids)]
    scored = translator.score_ids(ids, [h.tokens for h in best])
    for hyp, logprobs in zip(best, scored):
        assert len(logprobs) == len(hyp.tokens) + 1
        assert sum(logprobs) == pytest.approx(hyp.logprob, abs=1e-4)


def test_scores_are_the_teacher_forced_log_probabilities(tiny_run: Path, pairs: tuple[list[str], list[str]]) -> None:
    """Each pair alone through the model's forward pass, by hand, against the batched scores."""
    translator = TorchTranslator.load(tiny_run, device="cpu")
    model, c = translator.decoder.models[0], translator.model_cfg
    answers = score_pairs(translator, *pairs)
    assert len(answers) == len(pairs[0])
    for source, target, answer in zip(*pairs, answers):
        src = translator.tokenizer.encode([source])[0] + [c.eos_id]
        tgt = translator.tokenizer.encode_target([target])[0]
        with torch.inference_mode():
            logits = model(torch.tensor([src]), torch.tensor([[c.start_id] + tgt]))[0]
        expected = torch.log_softmax(logits.float(), -1).gather(1, torch.tensor(tgt + [c.eos_id])[:, None])[:, 0]
        assert answer.tokens == len(tgt) + 1 and answer.error is None
        assert answer.pieces == pytest.approx(expected.tolist(), abs=1e-5)
        assert (
            answer.score == pytest.approx(sum(expected.tolist()), abs=1e-4)
            and answer.mean == answer.score / answer.tokens
        )


def test_empty_and_over_long_pairs_are_answered_in_place(tiny_run: Path) -> None:
    translator = TorchTranslator.load(tiny_run, device="cpu")
    too_long = " ".join(["dog"] * (translator.max_source_tokens + 5))
    answers = score_pairs(
        translator,
        ["A dog.", "", "A dog.", too_long, "A cat."],
        ["Ein Hund.", "Ein Hund.", "  ", "Ein Hund.", "Eine Katze."],
    )
    assert [a.error for a in answers] == [
        None,
        "empty source",
        "empty target",
        f"source has {len(translator.tokenizer.encode([too_long])[0])} pieces, "
        f"over the model's {translator.max_source_tokens}",
        None,
    ]
    assert [a.score is None for a in answers] == [False, True, True, True, False]
    alone = score_pairs(translator, ["A cat."], ["Eine Katze."])[0]
    assert answers[4].score == pytest.approx(alone.score, abs=1e-5)  # the pairs around it shifted nothing
    assert answers[1].as_line(False, False) == "nan"
    assert json.loads(answers[1].as_line(True, True)) == {
        "score": None,
        "tokens": 0,
        "mean": None,
        "pieces": None,
        "error": "empty source",
    }


def test_files_of_different_lengths_are_refused_naming_them(tmp_path: Path) -> None:
    from mtkit.errors import UserError

    (tmp_path / "a.en").write_text("one\ntwo\nthree\n")
    (tmp_path / "b.de").write_text("eins\nzwei\n")
    chunks = read_pairs(tmp_path / "a.en", tmp_path / "b.de", chunk=1)
    assert next(chunks) == (["one"], ["eins"])
    assert next(chunks) == (["two"], ["zwei"])
    with pytest.raises(UserError, match=r"b.de has 2 lines, .*a.en more"):
        next(chunks)


def test_both_engines_give_the_same_scores_from_the_command_line(
    tiny_run: Path, pairs: tuple[list[str], list[str]], tmp_path: Path
) -> None:
    pytest.importorskip("ctranslate2", reason="ctranslate2 is not installed: pip install -e '.[ctranslate2]'")
    (tmp_path / "src.en").write_text("\n".join(pairs[0] + [""]) + "\n")
    (tmp_path / "tgt.de").write_text("\n".join(pairs[1] + ["Leer."]) + "\n")
    rows = {}
    for engine in ("torch", "ctranslate2"):
        run = run_mtkit_in_process(
            "score-pairs",
            tiny_run,
            "--source",
            tmp_path / "src.en",
            "--target",
            tmp_path / "tgt.de",
            "--engine",
            engine,
            "--json",
            "--device",
            "cpu",
        )
        assert run.returncode == 0, run.stderr
        rows[engine] = [json.loads(line) for line in run.stdout.splitlines()]
        assert len(rows[engine]) == len(pairs[0]) + 1 and rows[engine][-1]["error"] == "empty source"
        assert "41 pairs: 40 scored, 1 without a score" in run.stderr
    for ours, theirs in zip(rows["torch"][:-1], rows["ctranslate2"][:-1]):
        assert ours["tokens"] == theirs["tokens"]
        assert math.isclose(ours["score"], theirs["score"], abs_tol=1e-4), (ours, theirs)  # 9e-6 at most on 1,000 pairs


def test_an_ensemble_scores_each_piece_as_its_search_combines_the_members(
    tiny_run: Path, overfit_run: Path, pairs: tuple[list[str], list[str]], tmp_path: Path
) -> None:
    """`--ensemble` as distill's teacher scores a line: every piece the mean of the members' log-probabilities
    (log-linear, the default) or the log of the mean of their probabilities (--ensemble-mode linear)."""
    (tmp_path / "src.en").write_text("\n".join(pairs[0][:12]) + "\n")
    (tmp_path / "tgt.de").write_text("\n".join(pairs[1][:12]) + "\n")
    files = ("--source", tmp_path / "src.en", "--target", tmp_path / "tgt.de", "--json", "--piece-scores")

    def pieces(*models: object) -> list[list[float]]:
        run = run_mtkit_in_process("score-pairs", *models, *files, "--device", "cpu")
        assert run.returncode == 0, run.stderr
        return [json.loads(line)["pieces"] for line in run.stdout.splitlines()]

    tiny, overfit = pieces(tiny_run), pieces(overfit_run)
    linear = pieces(tiny_run, "--ensemble", overfit_run, "--ensemble-mode", "linear")
    log_linear = pieces(tiny_run, "--ensemble", overfit_run)
    assert len(linear) == 12 and tiny != overfit and linear != log_linear
    for a, b, lin, log_lin in zip(tiny, overfit, linear, log_linear):
        assert lin == pytest.approx([math.log((math.exp(x) + math.exp(y)) / 2) for x, y in zip(a, b)], abs=1e-5)
        assert log_lin == pytest.approx([(x + y) / 2 for x, y in zip(a, b)], abs=1e-5)
    refused = run_mtkit_in_process(
        "score-pairs", tiny_run, "--ensemble", overfit_run, *files, "--engine", "ctranslate2"
    )
    assert refused.returncode != 0 and "--ensemble" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    unknown = run_mtkit_in_process("score-pairs", tiny_run, "--ensemble", overfit_run, *files, "--ensemble-mode", "max")
    assert unknown.returncode != 0 and "--ensemble-mode max: choose one of log-linear, linear" in unknown.stderr
    assert len(unknown.stderr.strip().splitlines()) == 1


def test_the_command_names_a_missing_file(tiny_run: Path, tmp_path: Path) -> None:
    run = subprocess.run(
        [
            *MTKIT,
            "score-pairs",
            str(tiny_run),
            "--source",
            str(tmp_path / "nope.en"),
            "--target",
            str(tmp_path / "nope.de"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2 and run.stderr.strip() == f"error: {tmp_path / 'nope.en'}: no such file"


def test_a_multilingual_model_scores_with_the_code_of_the_target_language(
    en_de_fr_run: Path, multi30k: Path, tmp_path: Path
) -> None:
    """--target-lang puts the code in front of each source, as mtkit translate does: the memorized French
    references score far higher asked for French than for German; a line's own >>fr<< is the same as the option;
    without either, a model of two codes refuses in one line."""
    from tests.conftest import MULTILINGUAL_SENTENCES, multilingual_lines

    text = multilingual_lines(multi30k, MULTILINGUAL_SENTENCES)
    fr = TorchTranslator.load(en_de_fr_run, device="cpu", target_lang="fr")
    as_fr = [p.score for p in score_pairs(fr, text["en"], text["fr"])]
    as_de = [
        p.score
        for p in score_pairs(TorchTranslator.load(en_de_fr_run, device="cpu", target_lang="de"), text["en"], text["fr"])
    ]
    assert all(f > d + 5 for f, d in zip(as_fr, as_de)), (as_fr, as_de)
    own = [p.score for p in score_pairs(fr, [f">>fr<< {line}" for line in text["en"]], text["fr"])]
    assert own == as_fr
    (tmp_path / "src.en").write_text("\n".join(text["en"]) + "\n", encoding="utf-8")
    (tmp_path / "ref.fr").write_text("\n".join(text["fr"]) + "\n", encoding="utf-8")
    done = run_mtkit_in_process(
        "score-pairs",
        str(en_de_fr_run),
        "--source",
        str(tmp_path / "src.en"),
        "--target",
        str(tmp_path / "ref.fr"),
        "--device",
        "cpu",
        "--target-lang",
        "fr",
    )
    assert done.returncode == 0 and [float(x) for x in done.stdout.split()] == pytest.approx(as_fr, abs=1e-4)
    refused = run_mtkit_in_process(
        "score-pairs",
        str(en_de_fr_run),
        "--source",
        str(tmp_path / "src.en"),
        "--target",
        str(tmp_path / "ref.fr"),
        "--device",
        "cpu",
    )
    assert refused.returncode == 2 and "--target-lang: this model translates into de, fr; choose one" in refused.stderr
