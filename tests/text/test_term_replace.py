"""The glossary's "replace" way (mtkit.text.glossary.replaced and both plans) on hand-made word alignments: a target
goes in place of the output word its source term is most attended from, keeps that word's punctuation and the
sentence's capital, replaces nothing where the output already holds it nor a word holding another term's target, and
where the alignment is missing the term takes its next way."""

from __future__ import annotations

from mtkit.text.glossary import Glossary, replaced, term_ways
from mtkit.text.line_plan import plan_lines, prepare_line
from mtkit.text.sentence_plan import Asked, Output, SplitOptions, asked_alignments, plan_translation, run_plan

SOURCE = "A dog runs through the grass."
OUTPUT = "Ein Hund rennt durch das Gras."


def aligned(pairs: dict[int, int], n_out: int = 6, n_src: int = 6, weight: float = 0.8) -> list[list[float]]:
    """Output word j attends to source word pairs[j] with `weight`, the rest spread evenly."""
    rest = (1 - weight) / (n_src - 1)
    return [[weight if pairs.get(j) == i else rest for i in range(n_src)] for j in range(n_out)]


DIAGONAL = aligned({j: j for j in range(6)})


def test_the_target_takes_the_aligned_words_place_with_its_punctuation() -> None:
    assert replaced(OUTPUT, DIAGONAL, [(range(1, 2), "Köter")]) == "Ein Köter rennt durch das Gras."
    assert replaced(OUTPUT, DIAGONAL, [(range(5, 6), "Wiese")]) == "Ein Hund rennt durch das Wiese."
    both = replaced(OUTPUT, DIAGONAL, [(range(1, 2), "Köter"), (range(5, 6), "Wiese")])
    assert both == "Ein Köter rennt durch das Wiese."


def test_a_target_at_the_start_takes_the_sentences_capital() -> None:
    assert replaced("Hunde schlafen.", aligned({0: 0}, 2, 2), [(range(0, 1), "köter")]) == "Köter schlafen."
    assert replaced("Sie sehen Hunde.", aligned({2: 2}, 3, 3), [(range(2, 3), "köter")]) == "Sie sehen köter."


def test_an_output_that_holds_the_target_is_left_as_it_is() -> None:
    text = "Ein Köter rennt durch das Gras."
    assert replaced(text, DIAGONAL, [(range(1, 2), "Köter")]) == text


def test_words_and_an_alignment_that_disagree_replace_nothing() -> None:
    assert replaced(OUTPUT, DIAGONAL[:5], [(range(1, 2), "Köter")]) == OUTPUT


def test_a_word_holding_another_terms_target_is_never_written_over() -> None:
    # "dog" is attended from "Gras" most, but "Gras" is the target of "grass", already in the output: "dog" takes the
    # next word it is aligned to, never the held target (which the sentence would then lack, and go again).
    skewed = aligned({5: 1, 1: 1}, weight=0.6)
    skewed[5][1] = 0.9
    done = replaced(OUTPUT, skewed, [(range(1, 2), "Köter"), (range(5, 6), "Gras")])
    assert done == "Ein Köter rennt durch das Gras."


def test_two_terms_never_take_one_word_and_marks_or_digits_are_never_replaced() -> None:
    one_word = aligned({1: 1}, weight=0.5)
    for row in one_word:
        row[2] = row[1]  # source words 1 and 2 both attended from output word 1 only
    one_word[1][1] = one_word[1][2] = 0.45
    assert replaced(OUTPUT, one_word, [(range(1, 2), "Köter"), (range(2, 3), "Rennen")]).count("Köter") == 1
    digits = "Der 19 läuft ."
    attends_digits = aligned({1: 1, 3: 1}, 4, 4)
    done = replaced(digits, attends_digits, [(range(1, 2), "Köter")])
    assert "19" in done and done.endswith(" .") and done.count("Köter") == 1  # a word with letters takes it


def test_a_term_of_two_words_takes_two_output_words_aligned_to_it() -> None:
    text = "Ein rotes Hemd hängt."
    weights = aligned({1: 1, 2: 2}, 4, 4, 0.6)
    assert replaced(text, weights, [(range(1, 3), "Rothemd")]) == "Ein Rothemd hängt."


def test_replace_falls_back_to_stand_ins_on_either_engine() -> None:
    assert term_ways("replace", hints=False, guides=True) == ("replace", "placeholder")
    assert term_ways("replace", hints=False, guides=False) == ("replace", "placeholder")


GLOSSARY = Glossary((("dog", "Köter"),))


def test_the_line_plan_asks_for_the_alignment_and_finishes_with_the_target_in_place() -> None:
    line = prepare_line(SOURCE, SplitOptions("en", glossary=GLOSSARY, term_method="replace"))
    plan = plan_lines([line])
    asked = next(plan)
    assert asked_alignments(asked) == [("Köter",)] and list(asked) == [SOURCE]
    try:
        plan.send([Output(OUTPUT, -1.0, 7, alignment=DIAGONAL)])
    except StopIteration as done:
        (line,) = done.value
    assert line.finish(OUTPUT) == (
        "Ein Köter rennt durch das Gras.",
        [{"source": "dog", "target": "Köter", "applied": True}],
    )
    assert line.method == "replace"
    assert line.finish("Ein Hund schläft.")[0] == "Ein Hund schläft."  # another output (n-best) is not edited


def test_without_an_alignment_the_line_goes_again_by_the_next_way() -> None:
    line = prepare_line(SOURCE, SplitOptions("en", glossary=GLOSSARY, term_method="replace", term_guide=True))
    plan = plan_lines([line])
    next(plan)
    again = plan.send([Output(OUTPUT, -1.0, 7)])
    assert asked_alignments(again) is None and again.terms == [()]  # a stand-in now, nothing for the search to place
    assert list(again) != [SOURCE] and "dog" not in list(again)[0]


def test_the_sentence_plan_replaces_in_a_sentence_in_capitals() -> None:
    asked: list[Asked] = []

    def translate(sentences: list[str]) -> list[Output]:
        asked.append(sentences)
        return [Output(OUTPUT if "dog" in s else "Ein Mann schläft.", -1.0, 7, alignment=DIAGONAL) for s in sentences]

    options = SplitOptions("en", glossary=GLOSSARY, term_method="replace")
    texts = ["A DOG RUNS THROUGH THE GRASS. A man sleeps."]
    (done,) = run_plan(plan_translation(texts, options, lambda texts: [len(t.split()) for t in texts]), translate)
    assert done.text == "EIN KÖTER RENNT DURCH DAS GRAS. Ein Mann schläft."
    assert [s.method for s in done.sentences] == ["replace", ""]
    assert len(asked) == 1 and asked_alignments(asked[0]) == [("Köter",), ()]
