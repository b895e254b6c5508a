"""A glossary for a model trained with term hints (SplitOptions.term_pieces): its inline way writes the source term
with its target between the model's reserved pieces and reports "hint", a missed target still falls back to a
stand-in, and no output holds a reserved piece, whatever the model writes: the n-best, a runaway, a term at the end,
overlapping and nested terms, a term inside a protected span, an empty glossary, a glossary of 10,000 entries; both
paths (sentence by sentence, and the plain path's lines). A model without the pieces is as before."""

from __future__ import annotations

import dataclasses

import pytest

from mtkit.corpus.term_hints import TERM_PIECES, hint
from mtkit.errors import UserError
from mtkit.text.glossary import Glossary, hinted, without_pieces
from mtkit.text.line_plan import plan_lines, prepare_line
from mtkit.text.protect import ProtectConfig
from mtkit.text.sentence_plan import Output, SplitOptions, plan_translation, run_plan

GLOSSARY = Glossary((("red dog", "Rotfuchs"), ("park", "Park")))


def count(texts: list[str]) -> list[int]:
    return [len(t.split()) for t in texts]


def echo(text: str) -> str:
    """A model that writes back what it was given, the reserved pieces included (a real search never emits them:
    the engines suppress them; this checks what the text layer does with them anyway)."""
    return text.replace("A ", "Ein ")


def run(texts: list[str], glossary: Glossary | None, model=echo, method: str = "inline", others: int = 0, **kw):
    asked: list[list[str]] = []

    def translate(wanted: list[str]) -> list[Output]:
        asked.append(list(wanted))
        return [
            Output(model(text), -1.0, len(text.split()), [model(text) + f" {k}" for k in range(others)])
            for text in wanted
        ]

    options = SplitOptions("en", limit=64, glossary=glossary, term_method=method, term_pieces=TERM_PIECES, **kw)
    return run_plan(plan_translation(texts, options, count), translate), asked


def no_piece(*texts: str) -> bool:
    return not any(piece in text for text in texts for piece in TERM_PIECES)


def test_the_inline_way_is_a_hint_written_as_training_writes_it() -> None:
    assert hinted("red dog", "Rotfuchs", TERM_PIECES) == hint("red dog", "Rotfuchs")
    done, asked = run(["A red dog runs in the park."], GLOSSARY)
    assert asked == [[f"A {hint('red dog', 'Rotfuchs')} runs in the {hint('park', 'Park')}."]]
    sentence = done[0].sentences[0]
    assert sentence.method == "hint" and no_piece(sentence.translation)
    assert [term["applied"] for term in sentence.terms] == [True, True]
    assert sentence.translation == "Ein red dog Rotfuchs runs in the park Park."  # the echo, the pieces taken out


def test_a_missed_hint_falls_back_to_a_stand_in() -> None:
    done, asked = run(["A red dog runs."], GLOSSARY, model=lambda text: "Ein Hund rennt." if "__" in text else text)
    assert asked[1] == ["A 1 runs."] and done[0].sentences[0].method == "placeholder"
    assert done[0].sentences[0].translation == "A Rotfuchs runs."


def test_check_first_inline_tries_the_model_then_a_hint() -> None:
    done, asked = run(
        ["A red dog runs."], GLOSSARY, model=lambda t: t.replace("red dog", "Hund"), method="check-first-inline"
    )
    assert asked[0] == ["A red dog runs."] and asked[1] == [f"A {hint('red dog', 'Rotfuchs')} runs."]
    assert done[0].sentences[0].method == "hint"


def test_no_output_holds_a_reserved_piece() -> None:
    nested = Glossary((("New York", "New York"), ("New York City", "NYC"), ("York", "Jork"), ("City Hall", "Rathaus")))
    texts = [
        "A dog runs in the park",  # a term at the end, no final mark
        "We met in New York City Hall and in York.",  # nested and overlapping terms: the longest first
        "See https://park.example.org/red-dog for the park.",  # a term inside a protected span stays in the span
        "A park.",
    ]
    done, asked = run(texts, Glossary(nested.entries + GLOSSARY.entries), others=2)
    assert any("__source__" in text for batch in asked for text in batch)
    for translation in done:
        assert no_piece(translation.text, *translation.alternatives)
        for sentence in translation.sentences:
            assert no_piece(sentence.translation)
    found = [term["source"] for term in done[1].sentences[0].terms]
    assert found == ["New York City", "York"]  # "City Hall" overlaps the longer match and loses
    assert "https://park.example.org/red-dog" in done[2].text
    assert [term["source"] for term in done[2].sentences[0].terms] == ["park"]


def test_a_runaway_with_pieces_is_tamed_without_them() -> None:
    runaway = lambda text: " ".join([TERM_PIECES[0], "Hund"] * 40)  # noqa: E731
    done, _ = run(["A red dog runs."], GLOSSARY, model=runaway)
    assert no_piece(done[0].text) and done[0].sentences[0].guard


@pytest.mark.parametrize("size", [0, 10_000])
def test_an_empty_glossary_and_one_of_ten_thousand_entries(size: int) -> None:
    entries = tuple((f"term{i} word", f"Ziel{i}") for i in range(size))
    glossary = Glossary(entries + ((("red dog", "Rotfuchs"),) if size else ()))
    done, asked = run(["A red dog runs.", "The term9999 word is here."], glossary)
    assert no_piece(done[0].text, done[1].text)
    if size:
        assert [t["target"] for t in done[1].sentences[0].terms] == ["Ziel9999"] and done[1].sentences[
            0
        ].method == "hint"
    else:
        assert asked == [["A red dog runs.", "The term9999 word is here."]]


def test_the_plain_path_takes_hints_and_strips_pieces() -> None:
    options = SplitOptions("en", glossary=GLOSSARY, term_method="inline", term_pieces=TERM_PIECES)
    line = prepare_line("A red dog.", options)
    assert line.asked == f"A {hint('red dog', 'Rotfuchs')}." and line.method == "hint"
    text, terms = line.finish(echo(line.asked))
    assert no_piece(text) and terms[0]["applied"]
    plan = plan_lines([line])
    assert next(plan) == [line.asked]
    with pytest.raises(StopIteration):  # the hint held: nothing asked again
        plan.send([Output(echo(line.asked), 0.0, 1)])
    plain = prepare_line("A red dog.", SplitOptions("en", glossary=GLOSSARY, term_method="inline"))
    assert plain.asked == "A Rotfuchs." and plain.method == "inline"  # a model without the pieces: as before


def test_pieces_are_three_or_none_and_removed_with_their_spaces() -> None:
    with pytest.raises(UserError, match="term_pieces: three pieces or none"):
        SplitOptions("en", term_pieces=TERM_PIECES[:2])
    assert without_pieces("Ein __source__ Hund __target__ Rotfuchs __done__.", TERM_PIECES) == "Ein Hund Rotfuchs."
    assert without_pieces("__done__", TERM_PIECES) == ""
    assert without_pieces("Ein Hund.", TERM_PIECES) == "Ein Hund." and without_pieces("__done__", ()) == "__done__"


def test_a_reserved_piece_the_text_holds_is_kept_as_written_never_read_as_a_hint() -> None:
    text = "Type __source__ red dog __target__ to start."
    done, asked = run([text], GLOSSARY)
    # the text's pieces go as stand-ins, so the model reads no hint the text did not mean; the glossary's own does
    assert asked[0] == [f"Type 1 {hint('red dog', 'Rotfuchs')} 2 to start."]
    assert done[0].sentences[0].translation.count("__source__") == 1  # the text's piece comes back as written
    assert done[0].sentences[0].translation.count("__target__") == 1
    line = prepare_line(text, SplitOptions("en", glossary=GLOSSARY, term_method="inline", term_pieces=TERM_PIECES))
    text_back, _ = line.finish(echo(line.asked))
    assert text_back.count("__source__") == 1 and text_back.count("Rotfuchs") == 1
    plain = SplitOptions("en", protect=ProtectConfig(patterns=("ACME",)))
    assert plain.protect.patterns == ("ACME",)  # a model without the pieces: its patterns as given
    hinted_options = SplitOptions("en", protect=ProtectConfig(patterns=("ACME",)), term_pieces=TERM_PIECES)
    again = dataclasses.replace(dataclasses.replace(hinted_options, term_method="placeholder"), case=False)
    assert again.protect.patterns == hinted_options.protect.patterns and len(again.protect.patterns) == 2
