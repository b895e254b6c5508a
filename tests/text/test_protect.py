"""mtkit.text.protect: what is found and kept as written, and the restore that puts every span back exactly once
whatever the model did with its stand-in (dropped, repeated, mangled, moved)."""

from __future__ import annotations

import pytest

from mtkit.errors import UserError
from mtkit.text.protect import ProtectConfig, Span, copied_whole, mask, masked_like, protected_places, unmask

CFG = ProtectConfig()


def found(text: str, cfg: ProtectConfig = CFG) -> list[str]:
    return [text[low:high] for low, high in cfg.spans(text)]


@pytest.mark.parametrize(
    "text, spans",
    [
        ("Hello {name}, {{user}} and {0}.", ["{name}", "{{user}}", "{0}"]),
        ("%s of %1$s and %(count)d left", ["%s", "%1$s", "%(count)d"]),
        ("Set $HOME/runs and ${VAR} now", ["$HOME/runs", "${VAR}"]),
        (
            "See https://www.apache.org/licenses/LICENSE-2.0 for details.",
            ["https://www.apache.org/licenses/LICENSE-2.0"],
        ),
        ("Visit www.example.com, or (http://a.b/c?d=e).", ["www.example.com", "http://a.b/c?d=e"]),
        ("Write to john.doe@example.org.", ["john.doe@example.org"]),
        ("Run `pip install mtkit` first.", ["`pip install mtkit`"]),
        ("Open /usr/local/bin/ or docs/terminology.md today.", ["/usr/local/bin/", "docs/terminology.md"]),
        (
            "It costs 1,000,000 or 3.5 m or 42 % or -3 on 2006-05-01 at 12:30.",
            ["1,000,000", "3.5 m", "42 %", "-3"] + ["2006-05-01", "12:30"],
        ),
        (r"Math \(x^2\) and \[y\] and $$z$$ here", [r"\(x^2\)", r"\[y\]", "$$z$$"]),
        ("Two men and 2 dogs play in 1 park.", []),  # a plain count in a sentence is language
        ("A 10 m wall, 100 km/h and 2 men.", ["10 m", "100 km/h"]),  # a count with its unit is not
        ("A well-known 100-meter race.", []),
        ("A dog runs [1] through the grass [12] or [a] (3).", ["[1]", "[12]", "[a]", "(3)"]),  # markers
        ("Version 2.0, January 2004. In the 1990s f(1) ran 2004.5 km.", ["2.0", "2004", "2004.5 km"]),  # a year
    ],
)
def test_the_default_kinds_are_found(text: str, spans: list[str]) -> None:
    assert found(text) == spans


@pytest.mark.parametrize(
    "cell",
    ["12", "3.5", "2006", "42 %", "70", "1,024", "-3", "(12)", "2006-05-01", "{name}", "12 kg", "-3 °C", "1,024 MB"],
)
def test_segments_of_protected_text_or_numbers_only_are_copied_whole(cell: str) -> None:
    assert copied_whole(cell, CFG)


@pytest.mark.parametrize("text", ["Table 3", "A dog.", "...", "Two", ""])
def test_segments_with_words_are_translated(text: str) -> None:
    assert not copied_whole(text, CFG)


def test_the_default_off_keeps_only_the_users_patterns() -> None:
    cfg = ProtectConfig(default=False, patterns=(r"ACME-\d+",))
    assert found("Ticket ACME-12 at https://x.org", cfg) == ["ACME-12"]
    assert not copied_whole("12", ProtectConfig(default=False))
    assert found("Ticket ACME-12 at https://x.org", ProtectConfig(patterns=(r"ACME-\d+",))) == [
        "ACME-12",
        "https://x.org",
    ]


def test_a_bad_pattern_is_refused_naming_it() -> None:
    with pytest.raises(UserError, match=r"protect: bad regular expression '\(unclosed'"):
        ProtectConfig(patterns=("(unclosed",))


def masked(text: str):
    return mask(text, protected_places(text, CFG))


def test_stand_ins_are_numbers_the_sentence_does_not_hold_and_never_touch() -> None:
    m = masked("Call {a}{b} with 1 and 2 at x@y.org")
    assert m.spans[0].source == "{a}{b}"  # adjacent spans are one
    assert m.standins == ("3", "4")
    assert m.text == "Call 3 with 1 and 2 at 4"


@pytest.mark.parametrize(
    "model",
    [
        lambda text: text,  # carried
        lambda text: " ".join(word for word in text.split() if not word.isdigit()),  # dropped
        lambda text: text + " " + text,  # every stand-in twice
        lambda text: " ".join(w + "1" if w.isdigit() else w for w in text.split()),  # mangled
        lambda text: "",  # an empty translation
        lambda text: " ".join(reversed(text.split())),  # moved
    ],
)
def test_every_span_comes_back_exactly_once_whatever_the_model_did(model) -> None:
    source = "Hello {name}, see https://x.org/a and `ls -l` or %(count)d files in /tmp/x/y today."
    m = masked(source)
    done = unmask(model(m.text), m)
    for span in m.spans:
        assert done.text.count(span.source) == 1, done.text


def test_a_dropped_span_goes_to_its_share_of_the_translation() -> None:
    m = masked("one two {x} three four")
    assert unmask("eins zwei drei vier", m).text == "eins zwei {x} drei vier"
    assert unmask("eins zwei drei vier", masked("one two three four {x}")).text == "eins zwei drei vier {x}"
    assert unmask("eins zwei drei vier", masked("{x} one two three four")).text == "{x} eins zwei drei vier"


def test_a_repeated_stand_in_keeps_the_one_nearest_its_place() -> None:
    m = masked("one {x} two three four five six")
    standin = m.standins[0]
    assert unmask(f"eins {standin} zwei drei vier fünf sechs {standin}", m).text == "eins {x} zwei drei vier fünf sechs"
    assert unmask(f"eins {standin} zwei", m).carried == [True]
    assert unmask("eins zwei", m).carried == [False]


def test_a_term_is_put_back_as_its_target_in_the_sentences_case() -> None:
    m = mask("a red dog", [(6, 9, Span("dog", "Hund", term=True))])
    assert unmask(m.text.replace("a red", "ein roter"), m, str.upper).text == "ein roter HUND"


def test_a_sentence_without_spans_is_sent_as_it_is() -> None:
    m = masked("Two men and 2 dogs play in 1 park.")
    assert m.text == m.source and not m.spans
    assert unmask("Zwei Männer", m).text == "Zwei Männer"


def test_a_fuzzy_matchs_target_takes_the_sentences_stand_ins_and_loses_its_other_spans() -> None:
    """The model reads the match after the sentence: the sentence's `%s` is a stand-in there, and so it is in the
    match; a span only the match has (its own URL, its other placeholder) is not for the translation to copy."""
    cfg = ProtectConfig()
    source = "Cannot open %s at https://example.org/a/b"
    masked = mask(source, protected_places(source, cfg))
    assert masked.text == "Cannot open 1 at 2"
    assert (
        masked_like("Kann %s nicht unter https://other.org/q/r öffnen: %d", masked, cfg) == "Kann 1 nicht unter öffnen:"
    )
    assert masked_like("Keine Spanne", masked, cfg) == "Keine Spanne"
