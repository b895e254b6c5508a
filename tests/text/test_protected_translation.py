"""Protected text and glossaries through mtkit.text.sentence_plan and mtkit.text.markup: Multi30k sentences with a
placeholder, URL, e-mail address or inline code between two words come back with it byte for byte and exactly
once from a translator that drops, repeats, mangles and moves stand-ins; segments of numbers or URLs only are never
sent; glossary terms are put back and reported."""

from __future__ import annotations

import random
import zlib
from pathlib import Path

import pytest

from mtkit.text.glossary import Glossary
from mtkit.text.line_plan import prepare_line
from mtkit.text.protect import ProtectConfig
from mtkit.text.sentence_plan import Output, SplitOptions, guard_counts, plan_translation, run_plan
from tests.conftest import read_gz_lines
from tests.text.html_translation import translate_html

SPANS = [
    "{name}",
    "{{user.name}}",
    "%s",
    "%1$s",
    "%(count)d",
    "$HOME",
    "${VAR}",
    "https://www.apache.org/licenses/LICENSE-2.0",
    "http://example.com/a?b=c&d=1",
    "john.doe@example.org",
    "`pip install mtkit`",
    "`x = 1`",
    "{0}",
    "$HOME/runs",
]
OPTIONS = SplitOptions("en", limit=64)


def spanned_sentences(multi30k: Path, n: int = 300) -> list[tuple[str, str]]:
    """Multi30k sources, each with a span put between two of its words."""
    rng = random.Random(50)
    out = []
    for i, line in enumerate(read_gz_lines(multi30k / "val.en.gz", n)):
        words = line.split()
        k = rng.randrange(1, len(words))
        span = SPANS[i % len(SPANS)]
        out.append((" ".join(words[:k] + [span] + words[k:]), span))
    return out


def unruly(texts: list[str]) -> list[Output]:
    """A model that cannot copy: by each text's checksum it drops its numbers, repeats them, mangles them
    ("7" -> "7th"), moves them to the front or carries them, and upper-cases the words."""
    outputs = []
    for text in texts:
        words = text.upper().split()
        numbers = [w for w in words if w.isdigit()]
        way = zlib.crc32(text.encode()) % 5
        if way == 0:
            words = [w for w in words if not w.isdigit()]
        elif way == 1:
            words = words + numbers + numbers
        elif way == 2:
            words = [w + "TH" if w.isdigit() else w for w in words]
        elif way == 3:
            words = numbers + [w for w in words if not w.isdigit()]
        outputs.append(Output(" ".join(words), -1.0, len(words)))
    return outputs


def upper(texts: list[str]) -> list[Output]:
    return [Output(text.upper(), -1.0, len(text.split())) for text in texts]


def count(texts: list[str]) -> list[int]:
    return [len(text.split()) for text in texts]


def run(texts: list[str], options: SplitOptions = OPTIONS, model=unruly) -> tuple[list, list[list[str]]]:
    asked: list[list[str]] = []

    def recorded(wanted: list[str]) -> list[Output]:
        asked.append(list(wanted))
        return model(wanted)

    return run_plan(plan_translation(texts, options, count), recorded), asked


def test_300_sentences_keep_their_span_byte_for_byte_exactly_once(multi30k: Path) -> None:
    cases = spanned_sentences(multi30k)
    assert len(cases) == 300
    for split in (True, False):
        done, asked = run([text for text, _ in cases], SplitOptions("en", split=split, limit=64))
        assert [text.text.count(span) for text, (_, span) in zip(done, cases)] == [1] * 300
        assert not any(span in text for span in SPANS for batch in asked for text in batch)  # never sent
        assert guard_counts(done)["protected"] == 300


def test_a_sentence_without_spans_is_asked_as_before() -> None:
    sentences = ["Two men and 2 dogs play in 1 park.", "A MAN IN A RED SHIRT RUNS."]
    _, asked = run(sentences)
    _, raw = run(sentences, SplitOptions("en", limit=64, protect=ProtectConfig(default=False)))
    assert asked == raw == [["Two men and 2 dogs play in 1 park.", "A man in a red shirt runs."]]


def test_numbers_only_lines_and_urls_are_copied_untouched() -> None:
    text = "12\n3.5\n2006\n42 %\nSee https://www.apache.org/licenses/LICENSE-2.0 for details.\n(70)"
    done, asked = run([text], model=upper)
    assert asked == [["See 1 for details."]]
    assert done[0].text == "12\n3.5\n2006\n42 %\nSEE https://www.apache.org/licenses/LICENSE-2.0 FOR DETAILS.\n(70)"
    assert [s.protected for s in done[0].sentences] == [1, 1, 1, 1, 1, 1]


def html_translate(texts: list[str]) -> list[str]:
    done, _ = run(texts, SplitOptions("en", split=False, limit=64), upper)
    return [text.text for text in done]


def test_an_html_table_of_numbers_and_prefixed_mathml_come_back_untouched() -> None:
    table = "<table><tr><td>12</td><td>3.5</td></tr><tr><td>2006</td><td>42 %</td></tr></table>"
    assert translate_html(table, html_translate) == table
    math = '<p>Two <m:math xmlns:m="http://www.w3.org/1998/Math/MathML"><m:mn>2</m:mn></m:math> women.</p>'
    assert translate_html(math, html_translate) == math.replace("Two", "TWO").replace("women", "WOMEN")
    tex = r"<p>The area is \(\pi r^2\) and $$E = mc^2$$ here.</p>"
    assert translate_html(tex, html_translate) == tex.replace("The area is", "THE AREA IS").replace(
        " and ", " AND "
    ).replace("here", "HERE")


def test_glossary_terms_are_put_back_and_reported() -> None:
    glossary = Glossary((("red dog", "Rotfuchs"), ("dog", "Hund"), ("park", "Park")))
    options = SplitOptions("en", limit=64, glossary=glossary)
    done, asked = run(["A red dog and a dog run in the park", "A RED DOG RUNS HOME.", "No terms here."], options)
    assert done[0].text.count("Rotfuchs") == 1 and done[0].text.count("Hund") == 1 and "Park" in done[0].text
    assert done[0].sentences[0].terms == [
        {"source": "red dog", "target": "Rotfuchs", "applied": True},
        {"source": "dog", "target": "Hund", "applied": True},
        {"source": "park", "target": "Park", "applied": True},
    ]
    assert "ROTFUCHS" in done[1].text  # the sentence's capitals
    assert asked[0][2] == "No terms here." and done[2].sentences[0].terms == []


def test_a_term_inside_protected_text_is_left_alone() -> None:
    options = SplitOptions("en", limit=64, glossary=Glossary((("dog", "Hund"),)))
    done, _ = run(
        ["The dog at https://dog.example.org barks."], options, lambda texts: [Output(t, 0.0, 1) for t in texts]
    )
    assert done[0].text == "The Hund at https://dog.example.org barks."


def test_the_plain_line_path_keeps_spans_and_applies_the_case_round_trip() -> None:
    line = prepare_line("SEND {NAME} AN E-MAIL AT JOHN@EXAMPLE.ORG", OPTIONS)
    assert line.asked == "Send 1 an e-mail at 2"
    assert line.finish("Schicke 2 eine E-Mail 1 1")[0] == "SCHICKE JOHN@EXAMPLE.ORG EINE E-MAIL {NAME}"
    assert prepare_line("42 %", OPTIONS).asked == "" and prepare_line("42 %", OPTIONS).finish("x")[0] == "42 %"
    assert prepare_line("A MAN RUNS HOME.", OPTIONS, case=False).asked == "A MAN RUNS HOME."
    assert prepare_line("Two men, 2 dogs.", OPTIONS).asked == "Two men, 2 dogs."


@pytest.mark.parametrize("pattern", [r"ACME-\d+", r"\bv\d+\.\d+\b"])
def test_a_users_pattern_is_kept_too(pattern: str) -> None:
    options = SplitOptions("en", limit=64, protect=ProtectConfig(patterns=(pattern,)))
    done, asked = run(["Ticket ACME-12 is fixed in v2.1 now."], options)
    kept = "ACME-12" if "ACME" in pattern else "v2.1"
    assert kept not in asked[0][0] and done[0].text.count(kept) == 1
