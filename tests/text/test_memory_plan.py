"""mtkit.text.sentence_plan with a translation memory (mtkit.memory.matching.MemoryIndex) and a stand-in model: a
sentence the memory holds is answered from it and never sent, its placeholders the sentence's own; every other is
sent and carries the memory's best fuzzy match at or above the threshold."""

from __future__ import annotations

from mtkit.memory.matching import MemoryIndex
from mtkit.text.sentence_plan import Output, SplitOptions, plan_translation, run_plan

MEMORY = MemoryIndex(
    [("A dog runs in the snow.", "Ein Hund rennt im Schnee."), ("Delete {count} files.", "{count} Dateien löschen.")]
)


def upper(texts: list[str]) -> list[Output]:
    return [Output(text.upper(), -1.0, len(text.split())) for text in texts]


def test_exact_matches_are_never_sent_and_fuzzy_ones_are_reported() -> None:
    asked: list[list[str]] = []

    def model(texts: list[str]) -> list[Output]:
        asked.append(list(texts))
        return upper(texts)

    options = SplitOptions("en", memory=MEMORY, memory_threshold=70)
    text = "A dog  runs in the snow. Delete {n} files. A dog runs in the park."
    done = run_plan(plan_translation([text], options, lambda t: [len(x.split()) for x in t]), model)
    # Then the parts the fuzzy match differs in, to patch it: the upper-case model's "SNOW" is not in its target.
    assert asked == [["A dog runs in the park."], ["snow", "Snow", "park", "the snow.", "The snow.", "the park."]]
    assert done[0].text == "Ein Hund rennt im Schnee. {n} Dateien löschen. A DOG RUNS IN THE PARK."
    exact, placeholder, fuzzy = done[0].sentences
    assert exact.memory.report() == {"score": 100, "source": "A dog runs in the snow.", "target": MEMORY.targets[0]}
    assert exact.confidence is None and placeholder.memory.score == 100
    assert fuzzy.memory.score < 100 and fuzzy.memory.report()["target"] == "Ein Hund rennt im Schnee."
    strict = SplitOptions("en", memory=MEMORY, memory_threshold=fuzzy.memory.score + 1)
    done = run_plan(plan_translation(["A dog runs in the park."], strict, lambda t: [1 for _ in t]), upper)
    assert done[0].sentences[0].memory is None


def test_without_a_memory_nothing_changes() -> None:
    done = run_plan(plan_translation(["A dog runs in the snow."], SplitOptions("en"), lambda t: [1 for _ in t]), upper)
    assert done[0].text == "A DOG RUNS IN THE SNOW." and done[0].sentences[0].memory is None


def test_a_model_trained_with_fuzzy_matches_gets_its_sentences_match_after_the_piece() -> None:
    asked: list[list[str]] = []

    def model(texts: list[str]) -> list[Output]:
        asked.append(list(texts))
        return [Output(text.split(" <fz> ")[0].upper(), -1.0, 3) for text in texts]

    counted: list[list[str]] = []

    def count(texts: list[str]) -> list[int]:
        counted.append(list(texts))
        return [len(x.split()) for x in texts]

    options = SplitOptions("en", memory=MEMORY, memory_threshold=70, fuzzy_piece="<fz>")
    text = "A dog runs in the park. A dog runs in the snow. Two cats sleep."
    done = run_plan(plan_translation([text], options, count), model)
    assert asked[0] == ["A dog runs in the park. <fz> Ein Hund rennt im Schnee.", "Two cats sleep."]
    assert all("<fz>" not in t for t in asked[1])  # the parts to patch by go plain
    assert all("<fz>" not in t for texts in counted for t in texts)  # the guard weighs the sentence alone
    assert done[0].text == "A DOG RUNS IN THE PARK. Ein Hund rennt im Schnee. TWO CATS SLEEP."
    assert done[0].sentences[0].memory.score < 100 and done[0].sentences[2].memory is None


def test_a_fuzzy_match_differing_only_in_placeables_answers_and_is_never_sent() -> None:
    memory = MemoryIndex([("in_tr(%s): trailing junk ignored!", "in_tr(%s): nachfolgender Müll ignoriert!")])
    asked: list[list[str]] = []

    def model(texts: list[str]) -> list[Output]:
        asked.append(list(texts))
        return upper(texts)

    options = SplitOptions("en", memory=memory, memory_threshold=75, fuzzy_piece="<fz>")
    done = run_plan(plan_translation(["in_fddi(%s): trailing junk ignored!"], options, lambda t: [1 for _ in t]), model)
    assert asked == []
    assert done[0].text == "in_fddi(%s): nachfolgender Müll ignoriert!"
    assert 75 <= done[0].sentences[0].memory.score < 100  # reported as the fuzzy match it is


def test_a_fuzzy_match_is_patched_with_the_models_translation_of_what_differs() -> None:
    """Ortega et al.'s fuzzy-match repair: "snow" translates to "Schnee", which the match's target holds once, so
    "park"'s translation takes its place; the sentence is the memory's (no model confidence), its match reported."""
    words = {"snow": "Schnee", "park": "Park", "A dog runs in the park.": "Ein Hund läuft im Park."}

    def model(texts: list[str]) -> list[Output]:
        return [Output(words.get(text, text.upper()), -1.0, 2) for text in texts]

    options = SplitOptions("en", memory=MEMORY, memory_threshold=70)
    done = run_plan(plan_translation(["A dog runs in the park."], options, lambda t: [1 for _ in t]), model)
    assert done[0].text == "Ein Hund rennt im Park."
    sentence = done[0].sentences[0]
    assert sentence.confidence is None and 70 <= sentence.memory.score < 100


def test_an_unpatched_match_fills_only_entries_for_review() -> None:
    """Where the target holds none of the model's translations, the model's output stands; with memory_fill (a
    catalog's entries flagged for review) the match's target stands for an output that departs from it."""
    options = SplitOptions("en", memory=MEMORY, memory_threshold=70)
    done = run_plan(plan_translation(["A dog runs in the park."], options, lambda t: [1 for _ in t]), upper)
    assert done[0].text == "A DOG RUNS IN THE PARK."
    filled = SplitOptions("en", memory=MEMORY, memory_threshold=70, memory_fill=True)
    done = run_plan(plan_translation(["A dog runs in the park."], filled, lambda t: [1 for _ in t]), upper)
    assert done[0].text == "Ein Hund rennt im Schnee." and done[0].sentences[0].memory.score < 100
