"""mtkit.documents.subtitles: SRT and WebVTT cues translated by stand-in translators (upper case, a recorder); real
Multi30k sentences spread over several cues each, as subtitles cut them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mtkit.documents.job import DocumentError, run_jobs
from mtkit.documents.subtitles import WIDTH, shares, srt_job, vtt_job, wrap
from tests.conftest import read_gz_lines
from tests.documents.stand_ins import Recorder, upper


def sentences(multi30k: Path, count: int) -> list[str]:
    """Multi30k validation sentences that end with a full stop (so a splitter can see where they end)."""
    lines = [line for line in read_gz_lines(multi30k / "val.en.gz", 200) if line.endswith(".") and " " in line]
    return lines[:count]


def stamp(seconds: int) -> str:
    return f"00:{seconds // 60:02d}:{seconds % 60:02d},000"


def srt_spreading(texts: list[str], eol: str = "\n") -> tuple[str, list[str]]:
    """An SRT file whose cues cut each sentence at a word boundary: cue k holds the second half of sentence k-1 and
    the first half of sentence k, as subtitles do; and the cue texts in order."""
    halves = []
    for text in texts:
        words = text.split()
        halves.append((" ".join(words[: len(words) // 2]), " ".join(words[len(words) // 2 :])))
    cue_texts = [halves[0][0]] + [f"{halves[k - 1][1]} {halves[k][0]}" for k in range(1, len(texts))]
    cue_texts.append(halves[-1][1])
    blocks = [f"{k + 1}{eol}{stamp(2 * k)} --> {stamp(2 * k + 2)}{eol}{text}{eol}" for k, text in enumerate(cue_texts)]
    return eol.join(blocks), cue_texts


def cues_of(document: str) -> list[list[str]]:
    """Each cue's text lines (lines after a timing line, up to the blank line)."""
    out = []
    for block in re.split(r"(?:\r?\n){2,}", document.strip("\r\n")):
        lines = block.splitlines()
        at = next(i for i, line in enumerate(lines) if "-->" in line)
        out.append(lines[at + 1 :])
    return out


def skeleton(document: str) -> list[str]:
    """What is not cue text: numbers, identifiers and timing lines, with their line ends."""
    return [line for line in document.splitlines(keepends=True) if "-->" in line or line.strip().isdigit()]


def test_sentences_spanning_cues_are_asked_whole_and_each_once(multi30k: Path) -> None:
    texts = sentences(multi30k, 12)
    document, _ = srt_spreading(texts)
    recorder = Recorder()
    job = srt_job(document.encode(), "movie.srt", "en")
    out = run_jobs([job], recorder)[0].decode()
    assert recorder.asked == texts  # whole, in order, once each: no cue boundary read as a sentence end
    assert job.counts["spanning"] == len(texts)
    assert skeleton(out) == skeleton(document)  # numbers and timings byte for byte
    words_out = [word for cue in cues_of(out) for line in cue for word in line.split()]
    assert words_out == " ".join(texts).upper().split()  # every word once, in order, none lost or doubled


def test_translation_is_spread_by_source_characters_and_wrapped(multi30k: Path) -> None:
    texts = sentences(multi30k, 12)
    document, cue_texts = srt_spreading(texts)
    out = run_jobs([srt_job(document.encode(), "movie.srt", "en")], upper)[0].decode()
    for cue, source in zip(cues_of(out), cue_texts, strict=True):
        assert cue, "a cue lost all its words"
        assert all(len(line) <= WIDTH for line in cue)
        assert len(cue) <= 2 or len(" ".join(cue)) > 2 * WIDTH
        # the same translation (upper case): each cue gets about the words it held, give or take one at each end
        assert abs(len(" ".join(cue).split()) - len(source.split())) <= 2


def test_line_ends_bom_and_untouched_cues_are_kept() -> None:
    document = (
        "\ufeff1\r\n00:00:01,000 --> 00:00:02,000 X1:10 X2:20\r\nHello there.\r\n\r\n"
        "2\r\n00:00:02,000 --> 00:00:03,000\r\n♪ ♪\r\n\r\n3\r\n00:00:03,000 --> 00:00:04,000\r\nBye."
    )
    recorder = Recorder()
    out = run_jobs([srt_job(document.encode(), "m.srt", "en")], recorder)[0].decode("utf-8")
    assert recorder.asked == ["Hello there.", "Bye."]  # a cue without words is not sent
    assert out == document.replace("Hello there.", "HELLO THERE.").replace("Bye.", "BYE.")


def test_dialogue_lines_and_framing_tags() -> None:
    document = "1\n00:00:01,000 --> 00:00:02,000\n- Where are you?\n- <i>At home.</i>\n\n"
    document += "2\n00:00:02,000 --> 00:00:03,000\n{\\an8}<i>The <b>big</b> dog runs.</i>\n"
    recorder = Recorder()
    out = run_jobs([srt_job(document.encode(), "m.srt", "en")], recorder)[0].decode()
    assert recorder.asked == ["Where are you?", "At home.", "The big dog runs."]  # a dash starts a sentence
    assert cues_of(out) == [["- WHERE ARE YOU?", "- <i>AT HOME.</i>"], ["{\\an8}<i>THE <b>BIG</b> DOG RUNS.</i>"]]


def test_vtt_header_notes_settings_and_identifiers_are_kept() -> None:
    document = (
        "WEBVTT - a film\nKind: captions\n\nNOTE written by\nsomeone\n\nSTYLE\n::cue { color: lime }\n\n"
        "intro\n00:01.000 --> 00:04.000 align:start line:0%\n<v Bob>The fox &amp; the <c.loud>dog</c>\n\n"
        "00:00:04.000 --> 00:00:06.000\njump over the fence.\n"
    )
    recorder = Recorder()
    out = run_jobs([vtt_job(document.encode(), "film.vtt", "en")], recorder)[0].decode()
    assert recorder.asked == ["The fox & the dog jump over the fence."]  # entities decoded, across the two cues
    kept = document.split("<v Bob>")[0]
    assert out.startswith(kept)
    assert "\n00:00:04.000 --> 00:00:06.000\n" in out
    first, second = cues_of(out.split("\n\n", 3)[3])
    # a tag among the words stays in its line, at the same share of its words (the sentence's words moved)
    assert first == ["<v Bob>THE FOX &amp; <c.loud>THE</c>"]
    assert " ".join(first + second).replace("<v Bob>", "").replace("<c.loud>", "").replace("</c>", "") == (
        "THE FOX &amp; THE DOG JUMP OVER THE FENCE."
    )


def test_every_voice_class_and_language_span_comes_back_and_no_cue_comes_back_empty() -> None:
    """A cue of two speakers keeps both (the second's line was given to the first, its stage direction lost); class,
    language and bold spans come back around their words, in their line; a translation with fewer words than the
    cues its sentence spans cuts a word rather than leave a cue empty, and one too short for that leaves the cue
    its own text (counted)."""
    document = (
        "WEBVTT\n\n00:01.000 --> 00:02.000\n<v Roger>We are in New York City\n<v Neil>Hello <i>(laughs)</i> there.\n\n"
        "00:02.000 --> 00:03.000\n<c.yellow>This is yellow</c> and <b>bold</b> text.\n\n"
        "00:03.000 --> 00:04.000\n<lang en-US>Color</lang> and <lang en-GB>colour</lang>.\n\n"
        "00:04.000 --> 00:05.000\nA man walks\n\n00:05.000 --> 00:06.000\ninto a bar\n\n"
        "00:06.000 --> 00:07.000\nand drinks.\n"
    )
    recorder = Recorder()
    job = vtt_job(document.encode(), "film.vtt", "en")
    out = run_jobs([job], recorder)[0].decode()
    assert recorder.asked[:2] == ["We are in New York City", "Hello (laughs) there."]  # a new speaker: a sentence
    cues = cues_of(out.split("\n\n", 1)[1])
    assert cues[0] == ["<v Roger>WE ARE IN NEW YORK CITY", "<v Neil>HELLO <i>(LAUGHS)</i> THERE."]
    assert cues[1] == ["<c.yellow>THIS IS YELLOW</c> AND <b>BOLD</b> TEXT."]
    assert cues[2] == ["<lang en-US>COLOR</lang> AND <lang en-GB>COLOUR.</lang>"]
    answers = {"A man walks into a bar and drinks.": "Kneipenbesuch"}
    out = run_jobs([job], lambda texts: [answers.get(t, t) for t in texts])[0].decode()
    assert [cue[0] for cue in cues_of(out.split("\n\n", 1)[1])[3:]] == ["Kneipe", "nbe", "such"]
    answers = {"A man walks into a bar and drinks.": "K"}
    out = run_jobs([job], lambda texts: [answers.get(t, t) for t in texts])[0].decode()
    assert [cue[0] for cue in cues_of(out.split("\n\n", 1)[1])[3:]] == ["A man walks", "K", "and drinks."]
    assert job.counts["cues_kept"] == 2


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("1\n00:00:01,000 --> 00:00:02,000\nHi.\n\n2\n00:00:02 -> 00:00:03\nYo.\n", "movie.srt line 6: not a timing"),
        ("1\n00:00:01,000 --> 00:00:02,000\nHi.\n\nJust text\n", "movie.srt line 5: not a timing line"),
        ("Hello.\n", "movie.srt line 1: not a timing line"),
    ],
)
def test_bad_srt_is_refused_with_its_line(document: str, message: str) -> None:
    with pytest.raises(DocumentError, match=message):
        srt_job(document.encode(), "movie.srt", "en")


def test_bad_vtt_is_refused() -> None:
    with pytest.raises(DocumentError, match="film.vtt line 1: not a WebVTT file"):
        vtt_job(b"00:01.000 --> 00:02.000\nHi.\n", "film.vtt", "en")
    with pytest.raises(DocumentError, match="film.vtt line 4: not a timing line"):
        vtt_job(b"WEBVTT\n\nid\n00:01,000 --> 00:02.000\nHi.\n", "film.vtt", "en")
    with pytest.raises(DocumentError, match=r"film.vtt: not UTF-8 text \(byte 0xe9 at offset 11\)"):
        vtt_job("WEBVTT\n\nCaf\u00e9".encode("latin-1"), "film.vtt", "en")


def test_shares_cut_between_words_in_proportion() -> None:
    assert shares("a b c d", [1, 1]) == ["a b", "c d"]
    assert shares("a b c", [10, 1]) == ["a b", "c"]  # the small cue still gets a word
    assert shares("a b c d e f", [1, 1, 4]) == ["a", "b", "c d e f"]
    assert shares("a", [1, 1]) == ["", "a"] or shares("a", [1, 1]) == ["a", ""]
    assert shares("我们去公园", [1, 1]) == ["我们", "去公园"]  # no spaces: between characters
    assert shares("whole", [3]) == ["whole"]


def test_wrap_balances_two_lines_and_uses_more_only_when_needed() -> None:
    assert wrap("A short line.") == ["A short line."]
    two = wrap("A man in a blue shirt is standing on a ladder cleaning windows.")
    assert len(two) == 2 and all(len(line) <= WIDTH for line in two)
    assert abs(len(two[0]) - len(two[1])) <= 10
    long = " ".join(["word"] * 40)
    assert all(len(line) <= WIDTH for line in wrap(long)) and len(wrap(long)) == 5
    assert wrap("x" * 50) == ["x" * 50]  # a word longer than a line stays whole
