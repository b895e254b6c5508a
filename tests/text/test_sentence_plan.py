"""mtkit.text.sentence_plan and mtkit.text.guard with stand-in models: every sentence asked for once, white space as
written, and nothing lost: an empty or runaway translation is retried in pieces, then kept or tamed, and counted."""

from __future__ import annotations

import pytest

from mtkit.errors import UserError
from mtkit.text.guard import Guard
from mtkit.text.sentence_plan import Output, SplitOptions, guard_counts, plan_translation, run_plan

OPTIONS = SplitOptions("en", limit=64)


def count(texts: list[str]) -> list[int]:
    return [len(text.split()) for text in texts]


def upper(texts: list[str]) -> list[Output]:
    return [Output(text.upper(), -0.5 * len(text.split()), len(text.split()), [text.lower()]) for text in texts]


def translate(texts: list[str], model=upper, options: SplitOptions = OPTIONS):
    asked: list[list[str]] = []

    def recorded(wanted: list[str]) -> list[Output]:
        asked.append(list(wanted))
        return model(wanted)

    return run_plan(plan_translation(texts, options, count), recorded), asked


def test_sentences_of_every_text_in_one_batch_each_once() -> None:
    done, asked = translate(["A dog. A cat.", "A cat.\n\nA bird!  "])
    assert asked == [["A dog.", "A cat.", "A bird!"]]
    assert [t.text for t in done] == ["A DOG. A CAT.", "A CAT.\n\nA BIRD!  "]
    assert [s.source for s in done[1].sentences] == ["A cat.", "A bird!"]
    assert done[0].sentences[0].confidence == pytest.approx(-1.0 / 3)  # log-prob -1 over 2 tokens + eos
    assert done[0].sentences[0].word_confidence == pytest.approx(-0.5)
    assert done[0].alternatives == ["a dog. a cat."]
    assert guard_counts(done) == {"sentences": 4, "retried": 0, "kept": 0, "tamed": 0, "protected": 0}


def test_unsplit_texts_are_cut_at_line_breaks_only() -> None:
    done, asked = translate(["A dog. A cat.\nA bird."], options=SplitOptions("en", split=False))
    assert asked == [["A dog. A cat.", "A bird."]] and done[0].text == "A DOG. A CAT.\nA BIRD."


def test_no_words_are_kept_as_written_without_asking() -> None:
    done, asked = translate(["🙂🙂 ... !", "", "   "])
    assert asked == [] and [t.text for t in done] == ["🙂🙂 ... !", "", "   "]


def test_an_empty_translation_is_retried_in_pieces_then_kept() -> None:
    def empty_when_long(texts: list[str]) -> list[Output]:
        return [Output("" if len(t.split()) > 3 else t.upper(), -1.0, 2) for t in texts]

    done, asked = translate(["The first half, and the second half."], empty_when_long)
    assert asked == [["The first half, and the second half."], ["The first half,", "and the second half."]]
    assert done[0].text == "THE FIRST HALF, and the second half."
    assert [s.guard for s in done[0].sentences] == ["kept"]
    done, _ = translate(["Word."], lambda texts: [Output("", -1.0, 0) for _ in texts])
    assert done[0].text == "Word." and done[0].sentences[0].guard == "kept"


def test_a_runaway_is_retried_then_tamed() -> None:
    def loops(texts: list[str]) -> list[Output]:
        return [Output(" ".join(["la"] * 40), -9.0, 40) for _ in texts]

    done, asked = translate(["A short sentence."], loops)
    sentence = done[0].sentences[0]
    assert sentence.guard == "tamed" and sentence.translation == "la" and len(asked) == 1  # the loop cut, no retry
    assert guard_counts(done)["tamed"] == 1

    def long(texts: list[str]) -> list[Output]:  # far too long, no loop: retried in pieces
        return [Output(" ".join(f"w{i}" for i in range(10 * len(t.split()) + 20)), -9.0, 200) for t in texts]

    done, asked = translate(["Two halves here, and there."], long)
    assert asked[1] == ["Two halves here,", "and there."] and done[0].sentences[0].guard == "tamed"


FUSED = "A man in an orange hat looks at something A child splashes in the water near a table"  # no full stop


def first_words(long: int, short: int, unsure: float = 0.0):
    """A model that translates only the first `long` words of a text of over 12 words, else its first `short`, at
    a log-prob of -0.25 per token and eos, less `unsure` per token for a text that does not begin a sentence (a
    fragment left by a cut that is no sentence boundary)."""

    def model(texts: list[str]) -> list[Output]:
        kept = [t.upper().split()[: long if len(t.split()) > 12 else short] for t in texts]
        sure = [0.25 + (unsure if len(t.split()) <= 12 and not t.startswith(("A ", "The ")) else 0) for t in texts]
        return [Output(" ".join(words), -rate * (len(words) + 1), len(words)) for words, rate in zip(kept, sure)]

    return model


def test_a_long_sentence_translated_short_is_retried_in_pieces_kept_only_where_they_say_more() -> None:
    done, asked = translate([FUSED], first_words(4, 3))  # the whole: 4 tokens of 17; the pieces 3 + 3
    assert asked[1] == ["A man in an orange hat looks at something", "A child splashes in the water near a table"]
    assert done[0].text == "A MAN IN A CHILD SPLASHES" and done[0].sentences[0].guard == "retried"
    assert done[0].sentences[0].tokens == 3 + 1 + 3 + 1  # scored as the two pieces' outputs
    done, asked = translate([FUSED], first_words(4, 2))  # the pieces say no more: the whole stays, unmarked
    assert len(asked) == 2 and done[0].text == "A MAN IN AN" and done[0].sentences[0].guard == ""
    assert guard_counts(done)["retried"] == 0
    done, asked = translate([FUSED], first_words(4, 3), SplitOptions("en", limit=64, guard=Guard(short=0)))
    assert len(asked) == 1 and done[0].text == "A MAN IN AN"
    # short, but no capital after a small letter where a full stop could be missing: no second try
    done, asked = translate([FUSED.replace(" A child", ", a child")], first_words(4, 3))
    assert len(asked) == 1 and done[0].sentences[0].guard == ""
    # the pieces say more, but the model is less sure of them (mean log-prob per token): the whole stays
    done, asked = translate([FUSED.replace("A child", "Children")], first_words(4, 3, unsure=0.5))
    assert len(asked) == 2 and done[0].text == "A MAN IN AN" and done[0].sentences[0].guard == ""


@pytest.mark.parametrize(
    "sentence",
    [
        "A Boston Terrier is running on lush green grass in front of a white fence.",
        "Two young women in New York are walking down a busy street at night together.",
        "A family is swimming in the cold water of Lake Tahoe on a bright summer day.",
        "Then I walked past the building where NASA shows a TV series to many visitors.",
    ],
)
def test_a_name_mid_sentence_is_never_a_cut(sentence: str) -> None:
    """A short translation of a sentence with a name in it: no piece cut inside or before the name (a run of
    capitalised words), nor before "I" or a word in capitals; a one-sentence request answers as the line alone."""
    done, asked = translate([sentence], first_words(4, 3))
    assert len(asked) == 1 and done[0].sentences[0].guard == ""
    plain, _ = translate([sentence], first_words(4, 3), SplitOptions("en", split=False, guard=Guard(short=0)))
    assert done[0].text == plain[0].text


def test_a_loop_the_source_has_is_not_a_runaway() -> None:
    done, asked = translate(["ha ha ha ha ha"], lambda texts: [Output(t, -1.0, 5) for t in texts])
    assert len(asked) == 1 and done[0].text == "ha ha ha ha ha" and done[0].sentences[0].guard == ""


def test_guard() -> None:
    guard = Guard()
    assert guard.verdict("", 5, 0) == "empty"
    assert guard.verdict("Ein Hund.", 5, 4) == ""
    assert guard.verdict("x " * 100, 5, 100) == "runaway"
    assert guard.verdict("ein Hund ein Hund ein Hund ein Hund", 5, 12) == "runaway"
    assert guard.tame("ein Hund ein Hund ein Hund ein Hund läuft", 3) == "ein Hund läuft"
    assert guard.verdict("Ein Hund.", 20, 13) == "short" and guard.verdict("Ein Hund.", 20, 14) == ""
    assert guard.verdict("Ein Hund.", 11, 1) == ""  # a source under short_from tokens is never short
    assert guard.better_halves((-1.0, 4), [(-0.5, 3), (-0.5, 3)])  # more tokens, -0.125 per token against -0.2
    assert not guard.better_halves((-1.0, 4), [(-1.0, 1), (-1.0, 2)])  # no more tokens
    assert not guard.better_halves((-1.0, 4), [(-2.0, 3), (-2.0, 3)])  # more, but less sure: -0.5 per token
    with pytest.raises(UserError, match="guard short"):
        Guard(short=1.0)


def test_capitals_and_title_case_are_translated_in_sentence_case() -> None:
    done, asked = translate(["A MAN IN A RED SHIRT RUNS. Two Dogs Play In The Snow.", "NASA sent it."])
    assert asked == [["A man in a red shirt runs.", "Two dogs play in the snow.", "NASA sent it."]]
    assert done[0].text == "A MAN IN A RED SHIRT RUNS. TWO DOGS PLAY IN THE SNOW."  # upper() of upper()
    done, asked = translate(["A MAN RUNS."], options=SplitOptions("en", case=False))
    assert asked == [["A MAN RUNS."]]


def test_one_rule_says_which_plan_a_line_takes() -> None:
    from mtkit.text.line_plan import guarded

    assert guarded(split=True, guard=False, nbest=1, prefixes=False)  # sentences are always guarded
    assert guarded(split=False, guard=True, nbest=1, prefixes=False)  # a line's best alone: one guarded segment
    assert not guarded(split=False, guard=True, nbest=3, prefixes=False)  # n-best rows: the line plan
    assert not guarded(split=False, guard=True, nbest=1, prefixes=True)  # a forced prefix: the line plan
    assert not guarded(split=False, guard=False, nbest=1, prefixes=False)  # --no-guard
