"""mtkit.text.sentences: texts as sentences and the white space between them, given back byte for byte, and long
sentences cut where a reader would pause."""

from __future__ import annotations

import random

import pytest

from mtkit.text.sentences import cut_long, cut_segmented, halves, option_columns, split_lines, split_sentences, wordy

TEXTS = [
    "",
    "   ",
    "One sentence.",
    "A dog runs. A cat sleeps!  Why?\tBecause.",
    "  Leading and trailing.  \n\n  Next paragraph here. And more.\r\nLast line without a stop",
    "Dr. Smith paid $3.50, i.e. less than e.g. 4.5 euros. See https://example.com/a.b?c=d. Done.",
    "Zwei Männer. Deux hommes. Два человека. 两个男人。",
    "🙂🙂🙂",
    "\n\n\n",
    "no punctuation at all just words running on and on",
]


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("language", ["en", "de", "xx"])
def test_split_gives_the_text_back_exactly(text: str, language: str) -> None:
    for segmented in (split_sentences(text, language), split_lines(text)):
        assert segmented.join(segmented.sources) == text
        assert all(source == source.strip() and source for source in segmented.sources)
        assert len(segmented.gaps) == len(segmented.sources)


def test_sentences_and_line_breaks() -> None:
    segmented = split_sentences("A dog runs. A cat sleeps!  Why?\nNew line", "en")
    assert segmented.sources == ["A dog runs.", "A cat sleeps!", "Why?", "New line"]
    assert segmented.gaps == [" ", "  ", "\n", ""]
    assert segmented.join(["1", "2", "3", "4"]) == "1 2  3\n4"
    assert split_lines("A. B.\n\nC.").sources == ["A. B.", "C."]


HELP = (
    "Usage: diff [OPTION]... FILES\n"
    "  -y, --side-by-side            output in two columns\n"
    "      --color[=WHEN]            colorize the output\n"
    "  -o FILE, --output FILE        write to FILE.  Never to a pipe.\n"
    "  -n <num>\tshow <num> lines\n"
    "  -h, --help\n"
    "-5 degrees today.  A dog -- the brown one -- runs.\n"
)


def test_a_help_lines_option_column_is_kept_as_written_and_its_description_sent() -> None:
    for segmented in (split_sentences(HELP, "en"), split_lines(HELP)):
        assert segmented.join(segmented.sources) == HELP
        sent = "\n".join(segmented.sources)
        assert "output in two columns" in sent and "colorize the output" in sent and "show <num> lines" in sent
        assert not any(option in sent for option in ("--side-by-side", "--color", "--output", "-n <num>", "--help"))
        assert "-5 degrees today." in sent and "A dog -- the brown one -- runs." in sent  # not a help line
    assert {"write to FILE.", "Never to a pipe."} <= set(split_sentences(HELP, "en").sources)
    lines = HELP.splitlines(keepends=True)
    assert [HELP[c.start : c.stop] for c in option_columns(HELP)] == [
        "  -y, --side-by-side            ",
        "      --color[=WHEN]            ",
        "  -o FILE, --output FILE        ",
        "  -n <num>\t",
        "  -h, --help",
    ]
    assert option_columns(lines[0]) == []


def test_abbreviations_and_decimals_do_not_end_sentences() -> None:
    assert split_sentences("She paid 3.50 euros, e.g. for bread. Then she left.", "en").sources == [
        "She paid 3.50 euros, e.g. for bread.",
        "Then she left.",
    ]


def words(texts: list[str]) -> list[int]:
    return [len(text.split()) for text in texts]


def test_long_sentences_are_cut_at_clauses_then_words_then_characters() -> None:
    pieces, gaps = cut_long("one two three, four five six; seven eight nine", words, 3)
    assert pieces == ["one two three,", "four five six;", "seven eight nine"]
    assert "".join(p + g for p, g in zip(pieces, gaps)) == "one two three, four five six; seven eight nine"
    pieces, _ = cut_long("a b c d e f g h", words, 2)
    assert all(n <= 2 for n in words(pieces)) and " ".join(pieces) == "a b c d e f g h"
    assert halves("word") is None
    chars = "x" * 5000  # one "word" of 5,000 characters: cut between characters, nothing lost
    pieces, gaps = cut_long(chars, lambda texts: [len(t) for t in texts], 256)
    assert "".join(pieces) == chars and max(map(len, pieces)) <= 256 and set(gaps) == {""}


def test_cut_segmented_keeps_every_character() -> None:
    rng = random.Random(1)
    text = " ".join(rng.choice(["alpha", "beta,", "gamma;", "delta."]) for _ in range(2000))
    segmented = cut_segmented(split_sentences(text, "en"), words, 20)
    assert segmented.join(segmented.sources) == text
    assert max(words(segmented.sources)) <= 20


def test_wordy() -> None:
    assert wordy("a") and wordy("3") and wordy("два") and not wordy("🙂 ... !")


def test_halves_prefer_clauses_then_a_capital_after_a_small_letter() -> None:
    """A sentence that lost its full stop runs into the next: cut where the next one likely begins."""
    assert halves("A child splashes in the water Three people sit at a long table") == (
        "A child splashes in the water",
        " ",
        "Three people sit at a long table",
    )
    assert halves("One two three, four five Six seven") == ("One two three,", " ", "four five Six seven")
