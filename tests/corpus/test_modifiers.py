"""Training-time modifiers (mtkit.corpus.modifiers): each does what it says to the text, probability 0 changes nothing,
the draws are a function of the seed alone (on any thread), merge joins neighbours of one group only, and a batch's
token ids keep the ids preprocess put before the source and, where nothing changed or a line grew too long, their
stored ids."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import numpy as np
import pytest

from mtkit.corpus.modifiers import (
    KEY_NEIGHBOURS,
    BatchModifier,
    ModifiersConfig,
    add_typos,
    modify_pairs,
    remove_end_punct,
    title_case,
    upper_case,
)
from mtkit.errors import UserError
from mtkit.recipe import resolve_recipe
from mtkit.tokenizer import Tokenizer
from tests.conftest import read_gz_lines

PAIRS = [
    ("A man rides a bike.", "Ein Mann fährt Fahrrad."),
    ("Two dogs play in the snow!", "Zwei Hunde spielen im Schnee!"),
    ("Where is the girl?", "Wo ist das Mädchen?"),
    ("A woman sings", "Eine Frau singt"),
    ("People walk down the street.", "Leute gehen die Straße entlang."),
    ("The boy jumps.", "Der Junge springt."),
    ("A cat sleeps on a sofa.", "Eine Katze schläft auf einem Sofa."),
]


def test_upper_case_and_title_case() -> None:
    assert upper_case("Ein Mann fährt Fahrrad.") == "EIN MANN FÄHRT FAHRRAD."
    # OpusTrainer's title case: each word's first character up, the rest as it is; the spacing kept
    assert title_case("ein iPhone  und 'das' 2cm") == "Ein IPhone  Und 'das' 2cm"
    lines = modify_pairs(PAIRS, ModifiersConfig(upper_case=1.0), random.Random(1))
    assert [(line.src, line.tgt) for line in lines] == [(src.upper(), tgt.upper()) for src, tgt in PAIRS]
    lines = modify_pairs(PAIRS, ModifiersConfig(title_case=1.0), random.Random(1))
    assert (lines[0].src, lines[0].tgt) == ("A Man Rides A Bike.", "Ein Mann Fährt Fahrrad.")
    lines = modify_pairs(PAIRS, ModifiersConfig(upper_case=1.0, title_case=1.0), random.Random(1))
    assert lines[0].src == "A MAN RIDES A BIKE."  # capitals win when both are drawn


def test_end_punctuation_goes_only_when_both_sides_end_with_one_kind() -> None:
    assert remove_end_punct("A man rides.", "Ein Mann fährt.") == ("A man rides", "Ein Mann fährt")
    assert remove_end_punct("Wow!!!", "Toll !") == ("Wow", "Toll")
    assert remove_end_punct("你好。", "Hallo.") == ("你好", "Hallo")
    assert remove_end_punct("Why?", "Warum.") == ("Why?", "Warum.")  # two kinds
    assert remove_end_punct("A woman sings", "Eine Frau singt.") == ("A woman sings", "Eine Frau singt.")
    assert remove_end_punct("...", "Hallo.") == ("...", "Hallo.")  # nothing would be left of the source
    lines = modify_pairs(PAIRS, ModifiersConfig(remove_end_punct=1.0), random.Random(1))
    assert [(line.src, line.tgt, line.changed) for line in lines[2:4]] == [
        ("Where is the girl", "Wo ist das Mädchen", True),
        ("A woman sings", "Eine Frau singt", False),
    ]


def _typo_kind(old: str, new: str) -> str | None:
    """Which single typo turned word `old` into `new`, if one did."""
    for i in range(len(old)):
        if new == old[:i] + old[i + 1 :]:
            return "delete"
        if new == old[:i] + old[i] + old[i:]:
            return "repeat"
        if i + 1 < len(old) and new == old[:i] + old[i + 1] + old[i] + old[i + 2 :]:
            return "swap"
        if len(new) == len(old) and new[:i] + new[i + 1 :] == old[:i] + old[i + 1 :] and new[i] != old[i]:
            return "replace" if new[i].lower() in KEY_NEIGHBOURS[old[i].lower()] else None
    return None


def test_typos_are_one_to_three_character_slips_never_in_a_one_letter_word() -> None:
    text = "I saw a quick brown fox jump over the lazy dog"
    kinds = set()
    for seed in range(300):
        typed = add_typos(text, random.Random(seed))
        words, new_words = text.split(" "), typed.split(" ")
        assert len(new_words) == len(words) and (new_words[0], new_words[2]) == ("I", "a")
        assert abs(len(typed) - len(text)) <= 3
        changed = [(old, new) for old, new in zip(words, new_words) if old != new]
        assert 1 <= len(changed) <= 3 or typed == text  # two slips may undo each other
        if len(changed) == 1:
            kinds.add(_typo_kind(*changed[0]))
    assert {"swap", "delete", "repeat", "replace"} <= kinds
    assert add_typos("Ärger über Öl", random.Random(3)) != "Ärger über Öl"  # letters off the keyboard too
    lines = modify_pairs(PAIRS, ModifiersConfig(typos=1.0), random.Random(1))
    assert all(line.src != src and line.tgt == tgt for line, (src, tgt) in zip(lines, PAIRS))  # the source only


def test_probability_zero_changes_nothing() -> None:
    lines = modify_pairs(PAIRS, ModifiersConfig(), random.Random(1))
    assert [(line.pairs, line.src, line.tgt, line.changed) for line in lines] == [
        ((i,), src, tgt, False) for i, (src, tgt) in enumerate(PAIRS)
    ]


def test_the_same_seed_draws_the_same_lines_on_any_thread_another_seed_others() -> None:
    cfg = ModifiersConfig(upper_case=0.3, title_case=0.3, typos=0.5, remove_end_punct=0.5, merge=0.3)
    first = modify_pairs(PAIRS, cfg, random.Random(7))
    on_thread: list = []
    thread = threading.Thread(target=lambda: on_thread.append(modify_pairs(PAIRS, cfg, random.Random(7))))
    thread.start()
    thread.join()
    assert on_thread == [first] and modify_pairs(PAIRS, cfg, random.Random(7)) == first
    assert any(modify_pairs(PAIRS, cfg, random.Random(seed)) != first for seed in (8, 9))


def test_merge_joins_a_pair_with_the_next_one_or_two_of_its_group() -> None:
    lines = modify_pairs(PAIRS, ModifiersConfig(merge=1.0), random.Random(1))
    assert [i for line in lines for i in line.pairs] == list(range(len(PAIRS)))  # each pair once, in order
    assert all(len(line.pairs) in (2, 3) for line in lines[:-1]) and all(line.changed for line in lines[:-1])
    for line in lines:
        assert line.src == " ".join(PAIRS[i][0] for i in line.pairs)
        assert line.tgt == " ".join(PAIRS[i][1] for i in line.pairs)
    groups = ["de", "fr"] * 4  # neighbours of other groups (another language token) are never joined
    assert all(
        len(line.pairs) == 1 for line in modify_pairs(PAIRS, ModifiersConfig(merge=1.0), random.Random(1), groups)
    )


def test_the_config_refuses_a_probability_outside_0_1_naming_the_field() -> None:
    with pytest.raises(UserError, match=r"modifiers.typos must be in \[0, 1\] \(0: off\), got 1.5"):
        ModifiersConfig(typos=1.5)
    with pytest.raises(UserError, match=r"modifiers.merge must be in \[0, 1\]"):
        resolve_recipe(None, "tiny", ["modifiers.merge=-0.1"])
    recipe = resolve_recipe(None, "tiny", ["modifiers.upper_case=0.07", "modifiers.merge=1"])
    assert recipe.as_dict()["modifiers"] == {
        "upper_case": 0.07,
        "title_case": 0.0,
        "typos": 0.0,
        "remove_end_punct": 0.0,
        "merge": 1.0,
    }
    assert resolve_recipe(None, "tiny").modifiers.enabled() == []  # a recipe without [modifiers]: all off


@pytest.fixture(scope="module")
def tokenizer(multi30k_spm: Path) -> Tokenizer:
    return Tokenizer.load(multi30k_spm)


@pytest.fixture(scope="module")
def batch(tokenizer: Tokenizer, multi30k: Path) -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
    """40 Multi30k val pairs as stored ids: the even ones behind a language token (id 5), the odd ones behind a
    language token and a tag (ids 6 and 7)."""
    leads = [[5] if i % 2 == 0 else [6, 7] for i in range(40)]
    src = tokenizer.encode(read_gz_lines(multi30k / "val.en.gz", 40))
    tgt = tokenizer.encode(read_gz_lines(multi30k / "val.de.gz", 40))
    return (
        [np.asarray(lead + ids, dtype=np.uint16) for lead, ids in zip(leads, src)],
        [np.asarray(ids, dtype=np.uint16) for ids in tgt],
        np.arange(40),
    )


def modifier(
    tokenizer: Tokenizer, cfg: ModifiersConfig, max_len: int = 1024, leads: list | None = None
) -> BatchModifier:
    return BatchModifier(tokenizer, cfg, np.asarray(leads or [1, 2] * 20), seed=1, rank=0, max_len=max_len)


def same_arrays(found: list[np.ndarray], ids: list[np.ndarray]) -> bool:
    """Whether `found` are the very arrays `ids`."""
    return len(found) == len(ids) and all(a is b for a, b in zip(found, ids))


def test_a_batch_keeps_its_leading_ids_and_draws_from_its_seed(tokenizer: Tokenizer, batch: tuple) -> None:
    """Capitals are drawn once per batch (its lines keep one length), end punctuation per line."""
    src, tgt, indices = batch
    cfg = ModifiersConfig(upper_case=0.3, remove_end_punct=0.3)
    shouted = 0
    for position in range(12):
        out_src, _, rows = modifier(tokenizer, cfg).modify(src, tgt, indices, position=position, epoch=1)
        assert rows.tolist() == list(range(40)) and 3 < sum(not np.array_equal(a, b) for a, b in zip(src, out_src))
        for stored, modified in zip(src, out_src):
            lead = 1 if stored[0] == 5 else 2
            assert np.array_equal(modified[:lead], stored[:lead]) and modified.dtype == np.uint16
        texts = tokenizer.decode([seq[2 if seq[0] == 6 else 1 :].tolist() for seq in out_src])
        capitals = [text.isupper() for text in texts]
        assert all(capitals) or not any(capitals)
        shouted += all(capitals)
    assert 0 < shouted < 12
    cfg = ModifiersConfig(upper_case=0.3, typos=0.3, remove_end_punct=0.3)
    out_src, out_tgt, _ = modifier(tokenizer, cfg).modify(src, tgt, indices, position=3, epoch=1)
    again = modifier(tokenizer, cfg).modify(src, tgt, indices, position=3, epoch=1)
    assert all(np.array_equal(a, b) for a, b in zip(again[0] + again[1], out_src + out_tgt))
    other = modifier(tokenizer, cfg).modify(src, tgt, indices, position=4, epoch=1)
    assert not all(np.array_equal(a, b) for a, b in zip(other[0], out_src))
    assert same_arrays(modifier(tokenizer, ModifiersConfig()).modify(src, tgt, indices, 3, 1)[0], src)


def test_merged_lines_keep_the_first_pairs_leads_and_a_too_long_line_its_stored_ids(
    tokenizer: Tokenizer, batch: tuple
) -> None:
    src, tgt, indices = batch
    alike = [np.concatenate([[5], seq[2 if seq[0] == 6 else 1 :]]).astype(np.uint16) for seq in src]
    merging = modifier(tokenizer, ModifiersConfig(merge=1.0), leads=[1] * 40)
    out_src, out_tgt, rows = merging.modify(alike, tgt, indices, 0, 1)
    assert 40 / 3 <= len(out_src) <= 20 and len(out_tgt) == len(rows) == len(out_src)
    bodies = tokenizer.decode([seq[1:].tolist() for seq in alike])
    ends = [*rows.tolist()[1:], 40]
    for seq, target, start, end in zip(out_src, out_tgt, rows, ends):
        assert seq[0] == 5 and tokenizer.decode([seq[1:].tolist()])[0] == " ".join(bodies[start:end])
        assert tokenizer.decode([target.tolist()])[0] == " ".join(
            tokenizer.decode([t.tolist() for t in tgt[start:end]])
        )
    # alternating leads (two target languages): nothing is joined
    assert same_arrays(modifier(tokenizer, ModifiersConfig(merge=1.0)).modify(src, tgt, indices, 0, 1)[0], src)
    longest = max(len(seq) for seq in src + tgt)
    capitals = modifier(tokenizer, ModifiersConfig(upper_case=1.0), max_len=longest)
    out_src, out_tgt, rows = capitals.modify(src, tgt, indices, 0, 1)
    assert rows.tolist() == list(range(40)) and all(len(seq) <= longest for seq in out_src + out_tgt)
    assert 0 < sum(seq is ids for seq, ids in zip(out_src, src)) < 40  # grown past max_len: stored
