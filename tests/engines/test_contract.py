"""mtkit.engines.contract's source encoding for multilingual models: the target's code id first, a line's own code kept,
the errors that name the languages a model knows. Real tokenizers, no model."""

from __future__ import annotations

from pathlib import Path

import pytest

from mtkit.engines.contract import check_target_lang, encode_sources, source_codes
from mtkit.errors import UserError
from mtkit.tokenizer import TableTokenizer, Tokenizer


@pytest.fixture(scope="module")
def codes(en_de_fr_spm: Path) -> Tokenizer:
    return Tokenizer.load(en_de_fr_spm)


def table(spm: Path, drop: str = "") -> TableTokenizer:
    """The same pieces as a Marian-style table tokenizer; `drop` renamed so the table lacks it, ids unchanged."""
    model = spm.read_bytes()
    pieces = [f"<not {piece}>" if piece == drop else piece for piece in Tokenizer.from_bytes(model).pieces()]
    return TableTokenizer(model, model, pieces)


def test_the_code_of_the_target_starts_every_line_by_its_id(codes: Tokenizer) -> None:
    lines = ["A man is sleeping.", "  Two dogs play.  ", "", "   "]
    fr = codes.language_id("fr")
    assert encode_sources(codes, lines, 100, target_lang="fr") == [
        [fr, *codes.encode(["A man is sleeping."])[0]],
        [fr, *codes.encode(["Two dogs play."])[0]],
        [],
        [],
    ]


def test_a_line_that_begins_with_a_code_keeps_its_own_as_opus_mt_lines_do(codes: Tokenizer) -> None:
    de, fr = codes.language_id("de"), codes.language_id("fr")
    plain = codes.encode(["A man is sleeping."])[0]
    assert encode_sources(
        codes, [">>de<< A man is sleeping.", ">>de<<A man is sleeping.", "A man is sleeping."], 100, target_lang="fr"
    ) == [[de, *plain], [de, *plain], [fr, *plain]]
    assert encode_sources(codes, [">>fr<< A man is sleeping.", ">>fr<<"], 100) == [[fr, *plain], []]


def test_the_code_counts_in_the_length_and_survives_truncation(codes: Tokenizer) -> None:
    warnings: list[str] = []
    ids = encode_sources(codes, ["A man is sleeping on a green sofa."], 4, on_warning=warnings.append, target_lang="de")
    assert ids == [[codes.language_id("de"), *codes.encode(["A man is sleeping on a green sofa."])[0][:3]]]
    assert warnings and warnings[0].endswith("truncated to 4")


def test_no_target_on_a_model_of_two_codes_names_them_at_the_first_line_without_one(codes: Tokenizer) -> None:
    with pytest.raises(UserError) as refused:
        encode_sources(codes, [">>de<< A dog.", "", "A cat."], 100, first_lineno=7)
    assert str(refused.value) == (
        "line 9: --target-lang: this model translates into de, fr; choose one, or begin "
        "the line with its code, such as >>de<<"
    )
    with pytest.raises(UserError, match="^line 1: target: this model translates into de, fr; choose one"):
        source_codes(codes, ["A cat."], None, option="target")


def test_a_code_the_model_lacks_is_refused_naming_those_it_has(codes: Tokenizer, en_de_fr_spm: Path) -> None:
    for tokenizer in (codes, table(en_de_fr_spm)):
        with pytest.raises(UserError) as refused:
            encode_sources(tokenizer, ["A cat."], 100, target_lang="cs")
        assert str(refused.value) == "--target-lang cs: this model translates into de, fr; choose one"
        with pytest.raises(UserError, match="^--target-lang cs: this model translates into de, fr; choose one$"):
            check_target_lang(tokenizer, "cs", {})
    check_target_lang(codes, "FR", {})  # a code in another case is the same code


def test_a_model_of_one_code_uses_it_without_being_told(en_de_fr_spm: Path) -> None:
    only_de = table(en_de_fr_spm, drop=">>fr<<")
    assert only_de.language_codes() == ["de"]
    assert encode_sources(only_de, ["A cat."], 100)[0][0] == only_de.language_id("de")


def test_target_lang_on_a_model_without_codes_must_be_the_target_its_data_names(multi30k_spm: Path) -> None:
    plain = Tokenizer.load(multi30k_spm)
    manifest = {"source_lang": "en", "target_lang": "de"}
    check_target_lang(plain, "de", manifest)
    check_target_lang(plain, None, manifest)
    with pytest.raises(UserError) as refused:
        check_target_lang(plain, "fr", manifest)
    assert str(refused.value) == "--target-lang fr: this model has no >>xx<< language codes; it translates into de only"
    with pytest.raises(UserError, match="its data names no target language"):
        check_target_lang(plain, "fr", {})
    assert encode_sources(plain, ["A cat."], 100, target_lang="de") == plain.encode(["A cat."])
