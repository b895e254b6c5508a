"""mtkit score: numbers equal sacrebleu's own, signatures printed, mismatches refused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import sacrebleu

from mtkit.errors import UserError
from mtkit.score import score, score_files, split_compounds
from tests.conftest import read_gz_lines


def test_equals_sacrebleu(multi30k: Path) -> None:
    refs = read_gz_lines(multi30k / "val.de.gz")[:300]
    hyps = [" ".join(r.split()[:-1]) for r in refs]  # a systematically damaged "system"
    result = score(hyps, [refs])
    assert result.bleu == round(sacrebleu.corpus_bleu(hyps, [refs]).score, 2)
    assert result.chrf == round(sacrebleu.corpus_chrf(hyps, [refs]).score, 2)
    assert result.ter == round(sacrebleu.corpus_ter(hyps, [refs]).score, 2)
    assert "tok:13a" in result.signature and "nrefs:1" in result.signature
    assert 0 < result.bleu < 100


def test_tokenize_passes_through() -> None:
    hyps, refs = ["Das ist ein Test."], [["Das ist ein Test ."]]
    assert "tok:intl" in score(hyps, refs, tokenize="intl").signature
    with pytest.raises(UserError):
        score(hyps, refs, tokenize="no-such-tokenizer")


def test_compound_splitting() -> None:
    assert split_compounds("Ein rot-weißes Auto") == "Ein rot ##AT##-##AT## weißes Auto"
    assert split_compounds("a-b-c") == "a ##AT##-##AT## b-c"  # as the perl one-liner
    assert split_compounds("a - b") == "a - b"


def test_legacy_bleu_is_labelled_and_differs_from_nothing() -> None:
    hyps = ["Ein rot-weißes Auto fährt."]
    result = score(hyps, [["Ein rot-weißes Auto fährt."]], legacy=True)
    assert result.legacy_bleu == 100.0


def test_mismatch_is_an_error(tmp_path: Path) -> None:
    ref = tmp_path / "ref.de"
    ref.write_text("a\nb\nc\n", encoding="utf-8")
    with pytest.raises(UserError, match="2 lines but .*ref.de has 3 lines"):
        score_files(["a", "b"], "hyp", [ref])


def run_cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mtkit", *args], input=stdin, capture_output=True, text=True)


def test_cli_json_and_exit_codes(tmp_path: Path) -> None:
    ref = tmp_path / "ref.de"
    ref.write_text("Ein Mann schläft .\nZwei Hunde spielen im Schnee .\n", encoding="utf-8")
    ok = run_cli("score", "--ref", str(ref), "--json", stdin="Ein Mann schläft .\nZwei Hunde spielen .\n")
    assert ok.returncode == 0, ok.stderr
    data = json.loads(ok.stdout)
    assert set(data) >= {"bleu", "chrf", "ter", "signature"}
    bad = run_cli("score", "--ref", str(ref), stdin="only one line\n")
    assert bad.returncode == 2
    assert "Traceback" not in bad.stderr and "has 1 lines" in bad.stderr
    missing = run_cli("score", "--ref", str(tmp_path / "nope.de"), stdin="x\n")
    assert missing.returncode == 2 and "nope.de" in missing.stderr


def test_lc_tok_bleu_is_bleu_of_lowercased_normalised_moses_tokens() -> None:
    from sacremoses import MosesPunctNormalizer, MosesTokenizer

    from mtkit.score import lc_tok_bleu

    refs = ["Ein Mann sagt: „Hallo!“", "Zwei Hunde spielen im Schnee."]
    # Case, quote style and spacing around punctuation are what the literature's preparation removes.
    assert lc_tok_bleu(['ein MANN sagt : "hallo !"', "zwei hunde spielen im schnee ."], [refs], "de") == pytest.approx(
        100.0
    )
    hyps = ["Ein Mann sagt Hallo.", "Zwei Hunde laufen im Schnee."]
    normalizer, tokenizer = MosesPunctNormalizer(lang="de"), MosesTokenizer(lang="de")
    prepared = [
        [tokenizer.tokenize(normalizer.normalize(line), return_str=True, escape=True).lower() for line in lines]
        for lines in (hyps, refs)
    ]
    expected = sacrebleu.corpus_bleu(prepared[0], [prepared[1]], tokenize="none", force=True).score
    assert lc_tok_bleu(hyps, [refs], "de") == pytest.approx(expected)
    assert lc_tok_bleu(hyps, [refs], "de") != pytest.approx(score(hyps, [refs]).bleu, abs=0.01)


def test_lc_tok_takes_the_language_from_the_reference_name(tmp_path: Path) -> None:
    ref = tmp_path / "test_2016_flickr.de"
    ref.write_text("Ein Hund läuft.\n", encoding="utf-8")
    assert score_files(["ein hund läuft ."], "hyp", [ref], lc_tok=True).lc_tok_bleu == pytest.approx(100.0)
    nameless = tmp_path / "reference"
    nameless.write_text("Ein Hund läuft.\n", encoding="utf-8")
    with pytest.raises(UserError, match="gives no language code for --lc-tok"):
        score_files(["ein hund läuft ."], "hyp", [nameless], lc_tok=True)
    assert score_files(["ein hund läuft ."], "hyp", [nameless], lc_tok_lang="de").lc_tok_bleu == pytest.approx(100.0)
