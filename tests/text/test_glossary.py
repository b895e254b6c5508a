"""mtkit.text.glossary: DeepL's entry formats and a request's object read with one-line errors, and terms found as a
user expects (longest first, multi-word, any case, whole words, never inside protected text)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mtkit.errors import UserError
from mtkit.text.glossary import (
    MAX_REQUEST_ENTRIES,
    Glossary,
    glossary_from_mapping,
    holds,
    load_glossary,
    parse_glossary,
)

TERMS = Glossary(
    (
        ("dog", "Hund"),
        ("red dog", "Rotfuchs"),
        ("New York", "Neu-York"),
        ("New York City", "Big Apple"),
        ("York City", "Yorkstadt"),
        ("e-mail", "E-Post"),
        ("C++", "C-plus-plus"),
    )
)


def terms(sentence: str, glossary: Glossary = TERMS, protected=()) -> list[tuple[str, str]]:
    return [(sentence[low:high], target) for low, high, _, target in glossary.find(sentence, list(protected))]


def test_longest_match_first_and_multi_word_terms() -> None:
    assert terms("A red dog and a dog.") == [("red dog", "Rotfuchs"), ("dog", "Hund")]
    assert terms("They live in New York City now.") == [("New York City", "Big Apple")]  # nested: the longest
    assert terms("They live in New York now.") == [("New York", "Neu-York")]


def test_overlapping_terms_the_longer_wins() -> None:
    glossary = Glossary((("big red", "A"), ("red dog house", "B")))
    assert terms("a big red dog house", glossary) == [("red dog house", "B")]


def test_any_case_of_the_source_matches() -> None:
    assert terms("A RED DOG RUNS.") == [("RED DOG", "Rotfuchs")]
    assert terms("A Red Dog Runs Far.") == [("Red Dog", "Rotfuchs")]
    assert terms("Dog on a hill") == [("Dog", "Hund")]


def test_whole_words_only_and_a_term_at_the_end() -> None:
    assert terms("Dogs and hotdog and dogma") == []
    assert terms("I saw a dog") == [("dog", "Hund")]
    assert terms("Send an e-mail in C++.") == [("e-mail", "E-Post"), ("C++", "C-plus-plus")]


def test_never_inside_protected_text() -> None:
    sentence = "The dog at https://dog.example.org barks."
    url = sentence.index("https")
    assert terms(sentence, protected=[(url, url + len("https://dog.example.org"))]) == [("dog", "Hund")]


def test_an_empty_glossary_finds_nothing() -> None:
    assert Glossary().find("a dog") == [] and len(Glossary()) == 0


def test_ten_thousand_entries_are_read_and_matched() -> None:
    entries = {f"term{i} word": f"Ziel{i}" for i in range(MAX_REQUEST_ENTRIES)} | {"dog": "Hund"}
    entries.pop("term0 word")
    glossary = glossary_from_mapping(entries)
    assert len(glossary) == MAX_REQUEST_ENTRIES
    assert terms("a dog and TERM9999 word here", glossary) == [("dog", "Hund"), ("TERM9999 word", "Ziel9999")]


@pytest.mark.parametrize(
    ("text", "target", "held"),
    [
        ("Ein Hund rennt.", "Hund", True),
        ("Hunde rennen.", "Hund", False),  # inside a word
        ("Der Hund_1 und der Hund.", "Hund", True),  # the first is inside a word, the second is whole
        ("Ein Wachhund.", "Hund", False),
        ("C-plus-plus!", "C-plus-plus", True),
        ("(Hund)", "(Hund)", True),
        ("x(Hund)", "(Hund)", False),  # a letter right before it, whatever the target opens with
        ("Hund2", "Hund", False),
        ("Über", "Über", True),
        ("Überall", "Über", False),
        ("", "Hund", False),
        ("Geht ein Mann.", "geht", True),  # the sentence's first word takes a capital
        ("\u201eGeht!\u201c", "geht", True),
        ("Ein Mann Geht.", "geht", False),  # not at the start: as written
        ("Gehtweg.", "geht", False),
    ],
)
def test_a_target_is_held_as_a_whole_word(text: str, target: str, held: bool) -> None:
    assert holds(text, target) is held


def test_tsv_and_csv_as_deepl_writes_them(tmp_path: Path) -> None:
    assert parse_glossary("dog\tHund\n\nred dog\tRotfuchs\n", "tsv", "g.tsv").entries == (
        ("dog", "Hund"),
        ("red dog", "Rotfuchs"),
    )
    csv = 'dog,Hund\n"New York, NY","Neu-York, NY"\n"say ""hi""",sag hallo,en,de\n'
    assert parse_glossary(csv, "csv", "g.csv").entries == (
        ("dog", "Hund"),
        ("New York, NY", "Neu-York, NY"),
        ('say "hi"', "sag hallo"),
    )
    (tmp_path / "g.csv").write_text(csv, encoding="utf-8")
    (tmp_path / "g.tsv").write_text("\ufeffdog\tHund\n", encoding="utf-8")
    assert len(load_glossary(tmp_path / "g.csv")) == 3 and load_glossary(tmp_path / "g.tsv").entries == (
        ("dog", "Hund"),
    )


@pytest.mark.parametrize(
    "text, fmt, message",
    [
        ("dog\tHund\ncat Katze\n", "tsv", r"^g:2: expected source<TAB>target, found 1 field"),
        ("dog\tHund\tx\n", "tsv", r"^g:1: expected source<TAB>target, found 3 field"),
        ("dog\tHund\n \tKatze\n", "tsv", r"^g:2: an entry with an empty side"),
        ("dog\tHund\nDog\tKöter\n", "tsv", r"^g:2: 'Dog' is given twice with different targets"),
        ("dog,Hund\ncat,Katze,x\n", "csv", r"^g:2: expected source,target"),
        ('dog,"Hund\n', "csv", r"^g:\d+: malformed CSV"),
        ("dog,\n", "csv", r"^g:1: an entry with an empty side"),
        ("dog\tHund\n", "xml", r"^g: glossary format must be one of tsv, csv"),
    ],
)
def test_a_bad_file_is_one_line_naming_file_and_line(text: str, fmt: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        parse_glossary(text, fmt, "g")


def test_over_the_limit_is_refused_naming_it() -> None:
    with pytest.raises(UserError, match=r"^g:3: more than 2 entries, the limit of a glossary"):
        parse_glossary("a\tA\nb\tB\nc\tC\n", "tsv", "g", limit=2)
    with pytest.raises(UserError, match=r"^glossary: 10,001 entries, over the limit of 10,000"):
        glossary_from_mapping({f"t{i}": "x" for i in range(MAX_REQUEST_ENTRIES + 1)})


def test_a_file_that_cannot_be_read_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="cannot read the glossary"):
        load_glossary(tmp_path / "missing.tsv")
    (tmp_path / "latin1.tsv").write_bytes(b"caf\xe9\tCaf\xe9\n")
    with pytest.raises(UserError, match=r"latin1.tsv: the glossary is not UTF-8 \(byte 3\)"):
        load_glossary(tmp_path / "latin1.tsv")


@pytest.mark.parametrize(
    "value, message",
    [
        (["dog", "Hund"], r"^glossary must be an object of terms"),
        ("dog=Hund", r"^glossary must be an object of terms"),
        ({"dog": 1}, r"^glossary\['dog'\] must be a string; got int"),
        ({"dog": ["Hund"]}, r"^glossary\['dog'\] must be a string; got list"),
        ({"dog": ""}, r"^glossary: an entry with an empty side"),
        ({"dog": "Hund", "DOG": "Köter"}, r"^glossary: 'DOG' is given twice with different targets"),
    ],
)
def test_a_bad_request_glossary_names_the_field(value: object, message: str) -> None:
    with pytest.raises(UserError, match=message):
        glossary_from_mapping(value)
