"""A data directory preprocessed for term hints (mtkit.corpus.preprocess with term_hints, mtkit.corpus.term_alignments):
the sentencepiece model reserves the hints' pieces, each training corpus is aligned once beside the binarized text, a
complete set is reused and an incomplete or stale one made again, the same bytes for the same seed; without term hints
the directory is as it always was."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mtkit.corpus.alignments import AlignConfig
from mtkit.corpus.binarized import ParallelData, training_corpora
from mtkit.corpus.config import PreprocessConfig
from mtkit.corpus.preprocess import preprocess
from mtkit.corpus.term_alignments import TermLinks, complete, ensure_alignments, links_paths
from mtkit.corpus.term_hints import TERM_PIECES, term_pieces, tokens
from mtkit.errors import UserError
from mtkit.tokenizer import Tokenizer
from tests.conftest import preprocess_hinted, write_slice

pytest.importorskip("eflomal")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory, multi30k: Path) -> Path:
    return preprocess_hinted(tmp_path_factory.mktemp("hinted") / "data", multi30k, 600, vocab_size=700)


def test_pieces_reserved_and_every_pair_aligned_within_its_tokens(data: Path) -> None:
    manifest = json.loads((data / "manifest.json").read_text())
    assert manifest["term_pieces"] == list(TERM_PIECES)
    tokenizer = Tokenizer.load(data / "spm.model")
    assert term_pieces(tokenizer) == TERM_PIECES
    assert complete(data, training_corpora(manifest)["train"], AlignConfig(seed=1))
    links = TermLinks(data, manifest)
    train = ParallelData.open(data, "train", "en", "de")
    linked = 0
    for i in range(len(train)):
        src, tgt = tokenizer.decode([train.src(i).tolist(), train.tgt(i).tolist()])
        pairs = links.links(i)
        linked += bool(pairs)
        assert all(a < len(tokens(src)) and b < len(tokens(tgt)) for a, b in pairs)
    assert linked > 0.95 * len(train)
    assert not links_paths(data, "valid")[0].exists()  # training corpora only


def test_a_complete_set_is_reused_and_an_incomplete_one_made_again(data: Path, tmp_path: Path) -> None:
    manifest = json.loads((data / "manifest.json").read_text())
    bin_path, idx_path, record = links_paths(data, "train")
    before = bin_path.read_bytes(), idx_path.read_bytes()
    stamp = bin_path.stat().st_mtime_ns
    assert ensure_alignments(data, manifest) == []  # complete: reused, not written again
    assert bin_path.stat().st_mtime_ns == stamp
    copy = tmp_path / "copy"
    copy.mkdir()
    for path in data.iterdir():
        if path.is_file():
            os.link(path, copy / path.name)
    (copy / record.name).unlink()  # a run killed before its record was written
    assert ensure_alignments(copy, manifest) == ["train"]
    assert (copy / bin_path.name).read_bytes() == before[0] and (copy / idx_path.name).read_bytes() == before[1]
    (copy / record.name).write_text(json.dumps({**json.loads(record.read_text()), "pairs": 3}))  # another text's
    assert ensure_alignments(copy, manifest) == ["train"]
    (copy / record.name).unlink()
    with pytest.raises(UserError, match=r"train\.links\.json: no complete word alignments"):
        TermLinks(copy, manifest)


def test_without_term_hints_nothing_changes_and_a_plain_model_is_refused(tmp_path: Path, multi30k: Path) -> None:
    raw = tmp_path / "raw"
    raw.mkdir()
    write_slice(multi30k, "train", raw / "train", 200)
    cfg = PreprocessConfig("en", "de", train=str(raw / "train"), vocab_size=500)
    manifest = preprocess(cfg, tmp_path / "plain")
    assert "term_pieces" not in manifest and not list((tmp_path / "plain").glob("*.links.*"))
    assert term_pieces(Tokenizer.load(tmp_path / "plain" / "spm.model")) == ()
    reuse = PreprocessConfig("en", "de", train=str(raw / "train"), spm_model=str(tmp_path / "plain" / "spm.model"))
    with pytest.raises(
        UserError, match=r"spm\.model: has no pieces __source__, __target__, __done__ for \[term_hints\]"
    ):
        preprocess(reuse, tmp_path / "again", term_hints=True)
    assert not (tmp_path / "again").exists()


def test_the_same_text_preprocessed_again_is_not_aligned_again(tmp_path: Path, multi30k: Path, monkeypatch) -> None:
    import mtkit.corpus.term_alignments

    out = preprocess_hinted(tmp_path / "data", multi30k, 200, vocab_size=500)
    before = [path.read_bytes() for path in links_paths(out, "train")]
    with monkeypatch.context() as patched:
        patched.setattr(mtkit.corpus.term_alignments, "align", lambda *args: pytest.fail("aligned again"))
        preprocess_hinted(tmp_path / "data", multi30k, 200, vocab_size=500)
    assert [path.read_bytes() for path in links_paths(out, "train")] == before
    preprocess_hinted(tmp_path / "data", multi30k, 150, vocab_size=500)  # other text: aligned anew
    assert json.loads(links_paths(out, "train")[2].read_text())["pairs"] == 150
