"""A run's lexical shortlist in the CTranslate2 engine: `mtkit shortlist` writes it, the export carries it as
vmap.txt, `--shortlist` searches only its candidates (a shortlist of everything changes no line; a narrow one keeps
every output piece inside it), the cache follows it, and what cannot work is one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from mtkit.corpus.shortlist import ShortlistConfig, make_shortlist
from mtkit.corpus.shortlist_record import write_shortlist
from mtkit.engines.config import EngineConfig
from mtkit.engines.ct2 import CT2Translator
from mtkit.engines.ct2_cache import model_directory
from mtkit.engines.factory import EXPORT_ON_FIRST_USE, load_translator
from mtkit.errors import UserError
from mtkit.file_names import SHORTLIST_INFO, SHORTLIST_NAME, VMAP_NAME
from mtkit.files import file_sha256
from mtkit.tokenizer import load_tokenizer
from tests.engines.test_ct2 import mtkit


def translator(run: Path, shortlist: bool, **overrides: object) -> CT2Translator:
    return CT2Translator.load(
        run, exporter=EXPORT_ON_FIRST_USE, native=True, shortlist=shortlist, threads=1, **overrides
    )


def allowed_pieces(run: Path) -> tuple[set[str], dict[str, set[str]]]:
    """The vmap's always-allowed pieces and each source piece's candidates, as CTranslate2 reads them."""
    always: set[str] = set()
    per_piece: dict[str, set[str]] = {}
    for line in (run / SHORTLIST_NAME).read_text(encoding="utf-8").splitlines():
        key, _, targets = line.partition("\t")
        (per_piece.setdefault(key, set()) if key else always).update(targets.split())
    return always, per_piece


def test_a_shortlist_of_everything_changes_no_line(run: Path, lines: list[str]) -> None:
    everything = "\t" + " ".join(load_tokenizer(run / "spm.model").target_pieces()) + "\n"
    write_shortlist(run, everything, {"spm_sha256": file_sha256(run / "spm.model")})
    full = translator(run, False).translate(lines)
    assert translator(run, True).translate(lines) == full
    exact = [CT2Translator.load(run, exporter=EXPORT_ON_FIRST_USE, shortlist=s, threads=1) for s in (False, True)]
    assert exact[1].translate(lines) == exact[0].translate(lines)  # mtkit's own search over CTranslate2 too


def test_a_narrow_shortlist_keeps_every_output_piece_inside_it(run: Path, small_data: Path, lines: list[str]) -> None:
    make_shortlist(run, small_data, ShortlistConfig(frequent=20, best=3))
    narrow = translator(run, True, beam=4)
    always, per_piece = allowed_pieces(run)
    assert 20 <= len(always) and max(len(c) for c in per_piece.values()) <= 4  # 3 and the piece itself
    # CTranslate2 searches a batch's candidates together: one sentence per batch shows each sentence's own
    for src in narrow.encode_lines(lines[:30]):
        (best, *_), *_ = narrow.search_ids([src])
        allowed = always.union(*(per_piece.get(narrow.pieces[i], set()) for i in src))
        assert {narrow.target_pieces[i] for i in best.tokens} <= allowed
    assert narrow.translate(lines) != translator(run, False, beam=4).translate(lines)


def test_the_cache_follows_the_shortlist(run: Path, small_data: Path, lines: list[str]) -> None:
    make_shortlist(run, small_data, ShortlistConfig(frequent=50, best=5))
    cache = model_directory(run, EXPORT_ON_FIRST_USE)
    assert (cache / VMAP_NAME).read_bytes() == (run / SHORTLIST_NAME).read_bytes()
    key = json.loads((cache / "cache.json").read_text(encoding="utf-8"))
    assert key["shortlist"] == json.loads((run / SHORTLIST_INFO).read_text(encoding="utf-8"))["sha256"]
    make_shortlist(run, small_data, ShortlistConfig(frequent=60, best=5))
    assert (model_directory(run, EXPORT_ON_FIRST_USE) / VMAP_NAME).read_bytes() == (run / SHORTLIST_NAME).read_bytes()
    (run / SHORTLIST_INFO).unlink()
    (run / SHORTLIST_NAME).unlink()
    assert not (model_directory(run, EXPORT_ON_FIRST_USE) / VMAP_NAME).exists()
    with pytest.raises(UserError, match="has no shortlist; make one with `mtkit shortlist"):
        translator(run, True)


def test_shortlist_from_the_command_line_through_translate_and_export(
    run: Path, small_data: Path, lines: list[str], tmp_path: Path
) -> None:
    made = mtkit("shortlist", str(run), str(small_data), "--frequent", "30", "--best", "10", "--json")
    assert made.returncode == 0, made.stderr
    record = json.loads(made.stdout)
    assert record["frequent"] == 30 and record["best"] == 10 and record["pairs_counted"] == 2000
    text = "\n".join(lines[:10]) + "\n"
    args = ["translate", str(run), "--engine", "ctranslate2", "--ct2-search", "native", "--no-guard", "-q"]
    shortlisted = mtkit(*args, "--shortlist", stdin=text)
    assert shortlisted.returncode == 0, shortlisted.stderr
    assert shortlisted.stdout.splitlines() == translator(run, True).translate(lines[:10])
    exported = mtkit("export", str(run), "--to", "ctranslate2", "--out", str(tmp_path / "export"), "--json")
    assert exported.returncode == 0, exported.stderr
    assert json.loads(exported.stdout)["shortlist"] is True
    assert (tmp_path / "export" / VMAP_NAME).read_bytes() == (run / SHORTLIST_NAME).read_bytes()
    from_export = mtkit(
        "translate", str(tmp_path / "export"), "--engine", "ctranslate2", "--shortlist", "-q", stdin=text
    )
    assert from_export.returncode == 0, from_export.stderr


def test_what_cannot_work_is_one_line(run: Path, small_data: Path, tmp_path: Path) -> None:
    torch_engine = mtkit("translate", str(run), "--shortlist", "-q", stdin="A dog.\n")
    assert torch_engine.returncode != 0
    assert torch_engine.stderr.strip() == (
        "error: --shortlist: --engine torch scores the whole vocabulary; use --engine ctranslate2 (its vocabulary map)"
    )
    with pytest.raises(UserError, match="--engine torch scores the whole vocabulary"):
        load_translator(run, EngineConfig(engine="torch", shortlist=True))
    other = tmp_path / "other-data"
    shutil.copytree(small_data, other)
    manifest = json.loads((other / "manifest.json").read_text(encoding="utf-8"))
    (other / "manifest.json").write_text(json.dumps({**manifest, "spm_sha256": "0" * 64}), encoding="utf-8")
    refused = mtkit("shortlist", str(run), str(other))
    assert refused.returncode != 0 and "tokenized with another sentencepiece model" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    missing = mtkit("shortlist", str(tmp_path / "nowhere"), str(small_data))
    assert missing.returncode != 0 and "no such run directory" in missing.stderr


def test_serve_searches_the_shortlist_as_translate_does(
    run: Path, small_data: Path, lines: list[str], tmp_path: Path
) -> None:
    from tests.serve.test_app import MTKIT_WITHOUT_TORCH, Server, cli_output

    make_shortlist(run, small_data, ShortlistConfig(frequent=20, best=3))
    options = ("--engine", "ctranslate2", "--ct2-search", "native", "--shortlist")
    expected = cli_output(run, lines[:12], *options, "--beam", "4")  # exports the run with its shortlist first
    assert expected != cli_output(run, lines[:12], *options[:-1], "--beam", "4")
    server = Server(run, tmp_path / "serve.log", *options, command=MTKIT_WITHOUT_TORCH)
    try:
        status, _, answer = server.translate({"text": lines[:12], "beam": 4, "split_sentences": False})
        assert status == 200 and answer["translations"] == expected
        status, _, info = server.request("GET", "/info")
        assert status == 200 and info["shortlist"] is True
    finally:
        server.stop()
