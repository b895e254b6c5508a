"""mtkit export: the tiny run as a CTranslate2 model that translates and scores as mtkit does, served without mtkit."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import ctranslate2
import pytest
import torch

from mtkit.engines.torch_engine import TorchTranslator, pad_batch
from mtkit.errors import UserError
from mtkit.exports.ctranslate2 import EXPRESSIBLE, check_expressible, export_ctranslate2
from mtkit.exports.ctranslate2_library import CTRANSLATE2_INSTALL_HINT as INSTALL_HINT
from mtkit.model.transformer import ModelConfig
from mtkit.runs.checkpoint import load_checkpoint, save_checkpoint
from mtkit.runs.model import load_model
from mtkit.search.step import max_lengths
from tests.conftest import read_gz_lines, run_mtkit_in_process

N_LINES = 150  # Multi30k test sentences compared line by line (about 2 s for both engines)


@pytest.fixture(scope="module")
def exported(tiny_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(export_ctranslate2(tiny_run, tmp_path_factory.mktemp("export") / "ct2")["out"])


@pytest.fixture(scope="module")
def test_lines(multi30k: Path) -> list[str]:
    return read_gz_lines(multi30k / "test_2016_flickr.en.gz", N_LINES)


def test_every_model_option_has_an_export_rule() -> None:
    """A new ModelConfig option must be taught to the exporter (or it refuses every checkpoint that has it)."""
    assert {f.name for f in dataclasses.fields(ModelConfig)} == set(EXPRESSIBLE)
    check_expressible(dataclasses.asdict(ModelConfig(norm="pre", positions="learned", share_embeddings="none")), "x")
    with pytest.raises(UserError, match="moe_experts=8"):
        check_expressible({"d_model": 512, "moe_experts": 8}, "x")


def ct2_translate_like_mtkit(
    translator: ctranslate2.Translator, pieces: list[list[str]], beam: int, a: float, b: int
) -> list[list[str]]:
    """CTranslate2 at mtkit's settings: beam `beam`, no length penalty, mtkit's max length per sentence.

    mtkit decodes at most M = floor(a * source pieces + b) pieces and then forces the end token, scored;
    CTranslate2 decodes max_decoding_length steps and keeps a hypothesis that did not end, cut there. So
    sentences are decoded in groups of equal M with M + 1 steps (M pieces, then the end token). Where
    CTranslate2's best did not end, mtkit's is the best of the hypotheses that ended earlier and those
    cut at M pieces plus the end token: CTranslate2 finds them at M steps, score_batch adds the end token.
    """
    opts = dict(beam_size=beam, length_penalty=0, min_decoding_length=0)
    groups: dict[int, list[int]] = defaultdict(list)
    lengths = max_lengths(torch.tensor([len(p) for p in pieces]), a, b, 1024)  # the tiny run's max_positions
    for index, limit in enumerate(lengths.tolist()):
        groups[limit].append(index)
    best: list[list[str]] = [[] for _ in pieces]
    for limit, indices in groups.items():
        results = translator.translate_batch([pieces[i] for i in indices], max_decoding_length=limit + 1, **opts)
        for index, result in zip(indices, results):
            best[index] = result.hypotheses[0]
            if len(best[index]) <= limit:
                continue  # ended by itself
            cut = translator.translate_batch(
                [pieces[index]], max_decoding_length=limit, num_hypotheses=beam, return_scores=True, **opts
            )[0]
            scored = {tuple(h): s for h, s in zip(cut.hypotheses, cut.scores) if len(h) < limit}
            at_limit = [h for h in cut.hypotheses if len(h) == limit]
            for h, scoring in zip(at_limit, translator.score_batch([pieces[index]] * len(at_limit), at_limit)):
                scored[tuple(h)] = sum(scoring.log_probs)  # includes the end token's log-prob
            best[index] = list(max(scored, key=scored.__getitem__))
    return best


@pytest.mark.exactness
def test_ctranslate2_translates_every_sentence_as_mtkit(tiny_run: Path, exported: Path, test_lines: list[str]) -> None:
    import sentencepiece as spm

    ours = TorchTranslator.load(tiny_run, length_penalty=0.0)
    cfg = ours.cfg
    sp = spm.SentencePieceProcessor(model_file=str(exported / "spm.model"))
    pieces = [sp.encode(line.strip(), out_type=str) for line in test_lines]
    assert [[sp.piece_to_id(p) for p in ps] for ps in pieces] == ours.tokenizer.encode(
        [line.strip() for line in test_lines]
    )
    translator = ctranslate2.Translator(str(exported), device="cpu", intra_threads=1)
    theirs = ct2_translate_like_mtkit(translator, pieces, cfg.beam, cfg.max_len_a, cfg.max_len_b)
    assert [sp.decode(h) for h in theirs] == ours.translate(test_lines)


@pytest.mark.exactness
def test_score_batch_agrees_with_mtkit_log_probs(
    tiny_run: Path, exported: Path, multi30k: Path, test_lines: list[str]
) -> None:
    """Per-token log-probabilities of the references, end token included, from a teacher-forced forward pass."""
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(exported / "spm.model"))
    refs = read_gz_lines(multi30k / "test_2016_flickr.de.gz", 40)
    model, _ = load_model(tiny_run / "average.pt", torch.device("cpu"), torch.float32)
    c = model.cfg
    translator = ctranslate2.Translator(str(exported), device="cpu", intra_threads=1)
    src_pieces = [sp.encode(line, out_type=str) for line in test_lines[:40]]
    tgt_pieces = [sp.encode(line, out_type=str) for line in refs]
    scored = translator.score_batch(src_pieces, tgt_pieces)
    for src, tgt, result in zip(src_pieces, tgt_pieces, scored):
        tgt_ids = [sp.piece_to_id(p) for p in tgt]
        src_batch, _ = pad_batch([[sp.piece_to_id(p) for p in src]], c.pad_id, c.eos_id, torch.device("cpu"))
        with torch.inference_mode():
            logits = model(src_batch, torch.tensor([[c.bos_id] + tgt_ids]))[0]  # [T + 1, V]
        ours = torch.log_softmax(logits.float(), dim=-1).gather(1, torch.tensor(tgt_ids + [c.eos_id])[:, None])[:, 0]
        assert result.tokens == tgt + ["</s>"]
        assert torch.allclose(ours, torch.tensor(result.log_probs), atol=1e-4, rtol=0)


@pytest.mark.exactness
def test_a_foreign_sentencepiece_model_exports_and_translates_as_mtkit(
    foreign_run: Path, test_lines: list[str], tmp_path: Path
) -> None:
    """A run on a sentencepiece model with sentencepiece's default ids (unk 0, bos 1, eos 2, no pad): the export's
    vocabulary is in mtkit's order (pad added as "<pad>"), and CTranslate2 with that spm.model translates as mtkit."""
    import sentencepiece as spm

    out = Path(export_ctranslate2(foreign_run, tmp_path / "ct2")["out"])
    sp = spm.SentencePieceProcessor(model_file=str(out / "spm.model"))
    ours = TorchTranslator.load(foreign_run, length_penalty=0.0)
    vocabulary = json.loads((out / "shared_vocabulary.json").read_text(encoding="utf-8"))
    assert vocabulary[:4] == ["<pad>", "<unk>", "<s>", "</s>"] and len(vocabulary) == sp.get_piece_size() + 1
    lines = test_lines[:60]
    pieces = [sp.encode(line.strip(), out_type=str) for line in lines]
    translator = ctranslate2.Translator(str(out), device="cpu", intra_threads=1)
    cfg = ours.cfg
    theirs = ct2_translate_like_mtkit(translator, pieces, cfg.beam, cfg.max_len_a, cfg.max_len_b)
    assert [sp.decode(h) for h in theirs] == ours.translate(lines)


README_CODE = re.compile(r"```python\n(.*?)```", re.S)
WITHOUT_MTKIT = (  # mtkit and torch cannot be imported: the export is served by CTranslate2 + sentencepiece
    "import sys\n"
    "sys.modules['mtkit'] = None\n"
    "sys.modules['torch'] = None\n"
    "try:\n"
    "    import mtkit\n"
    "    sys.exit('mtkit was importable')\n"
    "except ImportError:\n"
    "    pass\n"
)


def test_export_serves_without_mtkit_as_its_readme_says(tiny_run: Path, exported: Path) -> None:
    """The README.md written into the export, run as printed in a process where mtkit cannot be imported."""
    code = README_CODE.search((exported / "README.md").read_text(encoding="utf-8")).group(1)
    run = subprocess.run([sys.executable, "-c", WITHOUT_MTKIT + code], cwd=exported, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    lines = re.search(r"lines = (\[.*\])", code).group(1)
    assert run.stdout.splitlines() == TorchTranslator.load(tiny_run, length_penalty=0.0).translate(eval(lines))


def test_quantized_export_replaces_an_earlier_export(tiny_run: Path, exported: Path, tmp_path: Path) -> None:
    out = tmp_path / "int8"
    export_ctranslate2(tiny_run, out)
    summary = export_ctranslate2(tiny_run, out, quantization="int8")  # over the float32 one
    assert json.loads((out / "mtkit.json").read_text())["quantization"] == "int8"
    assert (out / "model.bin").stat().st_size < (exported / "model.bin").stat().st_size / 2
    assert summary["files"] == sorted(p.name for p in exported.iterdir())
    result = ctranslate2.Translator(str(out), device="cpu", compute_type="int8").translate_batch([["▁A", "▁man"]])
    assert result[0].hypotheses[0]
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="not an mtkit export"):
        export_ctranslate2(tiny_run, tmp_path / "other")
    assert (tmp_path / "other" / "notes.txt").read_text() == "mine"


def run_mtkit(args: list[str], setup: str = "") -> subprocess.CompletedProcess:
    script = f"import sys\n{setup}sys.argv = ['mtkit'] + {args!r}\nfrom mtkit.cli.main import main\nmain()\n"
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)


def test_cli_refuses_an_option_ctranslate2_lacks_in_one_line(tiny_run: Path, tmp_path: Path) -> None:
    payload = load_checkpoint(tiny_run / "average.pt")
    payload["configs"]["model"]["moe_experts"] = 8  # as a newer mtkit's mixture-of-experts checkpoint would
    save_checkpoint(tmp_path / "moe.pt", payload)
    run = run_mtkit(["export", str(tmp_path / "moe.pt"), "--to", "ctranslate2", "--out", str(tmp_path / "out")])
    assert run.returncode == 2
    assert len(run.stderr.splitlines()) == 1 and "moe_experts=8" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "out").exists()


def test_cli_without_the_extra_says_how_to_install_it(tiny_run: Path, tmp_path: Path) -> None:
    block = "sys.modules['ctranslate2'] = None\n"  # `import ctranslate2` raises ImportError, as when not installed
    run = run_mtkit(["export", str(tiny_run), "--to", "ctranslate2", "--out", str(tmp_path / "out")], setup=block)
    assert run.returncode == 2
    assert run.stderr.splitlines() == [f"error: {INSTALL_HINT}"]
    assert "pip install -e '.[ctranslate2]'" in INSTALL_HINT


def test_cli_export_prints_json(tiny_run: Path, tmp_path: Path) -> None:
    run = run_mtkit_in_process("export", tiny_run, "--to", "ctranslate2", "--out", tmp_path / "out", "--json")
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert summary["checkpoint"] == str(tiny_run / "average.pt") and summary["quantization"] == "float32"
    assert {"model.bin", "config.json", "spm.model", "README.md", "mtkit.json"} <= set(summary["files"])
    assert math.isclose(summary["bytes"], sum(p.stat().st_size for p in (tmp_path / "out").iterdir()))
