"""Term hints in training (mtkit.corpus.term_hints and BatchModifier's hints): the spans a term may be, by hand; a
hint holds the source span as written and its aligned target; the draws are a function of the seed alone and leave
the modifiers' own draws as they were; a model without the reserved pieces has none."""

from __future__ import annotations

import random
import re
from pathlib import Path

import numpy as np
import pytest

from mtkit.corpus.modifiers import BatchModifier, ModifiersConfig, TermHints
from mtkit.corpus.term_hints import (
    TERM_PIECES,
    TermHintsConfig,
    add_hints,
    aligned_spans,
    aligned_text,
    hint,
    term_piece_ids,
    term_pieces,
    tokens,
)
from mtkit.corpus.tokenizer_training import train_tokenizer
from mtkit.errors import UserError
from mtkit.recipe import resolve_recipe
from mtkit.tokenizer import Tokenizer

SRC = "A man in a red shirt rides a bike."
TGT = "Ein Mann in einem roten Hemd fährt Fahrrad."
# A man in a red shirt rides a bike . / Ein Mann in einem roten Hemd fährt Fahrrad .
LINKS = [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (6, 6), (8, 7), (9, 8)]
HINT = re.compile(r"__source__ (.+?) __target__ (.+?) __done__")


def words(text: str) -> list[str]:
    return [text[a:b] for a, b in tokens(text)]


def test_config_refuses_bad_values_naming_the_key() -> None:
    assert not TermHintsConfig().enabled and TermHintsConfig(probability=0.1).enabled
    for values, key in (
        ({"probability": 1.5}, "probability"),
        ({"max_terms": 4}, "max_terms"),
        ({"replace": -1}, "replace"),
    ):
        with pytest.raises(UserError, match=rf"^term_hints\.{key} "):
            TermHintsConfig(**values)
    recipe = resolve_recipe(None, "tiny", ["term_hints.probability=0.2", "term_hints.max_terms=3"])
    assert recipe.term_hints == TermHintsConfig(0.2, 3, 0.1) and recipe.as_dict()["term_hints"]["probability"] == 0.2
    assert resolve_recipe(None, "tiny").term_hints == TermHintsConfig()  # off by default
    with pytest.raises(UserError, match="unknown key term_hints.share"):
        resolve_recipe(None, "tiny", ["term_hints.share=0.2"])


def test_tokens_split_punctuation_from_words() -> None:
    assert words("A dog's ball, 3.5 kg!") == ["A", "dog", "'", "s", "ball", ",", "3", ".", "5", "kg", "!"]
    assert aligned_text("  A dog's  ball. ") == "A dog ' s ball ."


def test_aligned_spans_by_hand() -> None:
    spans = aligned_spans(words(SRC), words(TGT), LINKS)
    assert (4, 6, 4, 6) in spans  # red shirt / roten Hemd
    assert (8, 9, 7, 8) in spans  # bike / Fahrrad
    assert (6, 9, 6, 8) in spans  # rides a bike / fährt Fahrrad: "a" unaligned inside
    assert all(b - a <= 3 and d - c <= 4 for a, b, c, d in spans)
    assert (3, 4, 3, 4) not in spans and (2, 4, 2, 4) not in spans  # "a", "in a": no word of three letters
    assert all(b <= 9 for _, b, _, _ in spans)  # never the final "." alone or at an end
    # (1, 5) crosses: "man" is linked into "Hemd", so no span with "man" but not "shirt" holds "Hemd" consistently
    crossed = LINKS + [(1, 5)]
    assert (1, 2, 1, 2) not in aligned_spans(words(SRC), words(TGT), crossed)
    # links past the tokens (the final mark taken away by a modifier) are left out, not an error
    assert aligned_spans(words(SRC[:-1]), words(TGT[:-1]), LINKS) == [s for s in spans if s[1] <= 9 and s[3] <= 8]
    assert aligned_spans(words(SRC), words(TGT), []) == []


def test_hints_hold_the_source_as_written_and_an_aligned_target() -> None:
    cfg = TermHintsConfig(probability=1.0, max_terms=3, replace=0.0)
    counts = set()
    for seed in range(30):
        out = add_hints(SRC, TGT, LINKS, cfg, random.Random(seed), TERM_PIECES)
        found = HINT.findall(out)
        counts.add(len(found))
        assert 1 <= len(found) <= 3 and HINT.sub(lambda m: m.group(1), out) == SRC
        assert all(target in TGT for _, target in found)
        assert out == add_hints(SRC, TGT, LINKS, cfg, random.Random(seed), TERM_PIECES)  # the seed alone
    assert counts == {1, 2, 3}
    assert add_hints(SRC, TGT, LINKS, TermHintsConfig(probability=0.0), random.Random(1), TERM_PIECES) == SRC
    assert add_hints(SRC, TGT, [], cfg, random.Random(1), TERM_PIECES) == SRC  # nothing aligned: as it is
    copied = add_hints(SRC, TGT, LINKS, TermHintsConfig(1.0, 1, replace=1.0), random.Random(3), TERM_PIECES)
    assert "__" not in copied and copied != SRC  # the replace share: the target in the source's place
    assert hint("red shirt", "roten Hemd") == "__source__ red shirt __target__ roten Hemd __done__"


def test_reserved_pieces_are_found_only_in_a_model_that_has_them(tmp_path: Path) -> None:
    lines = [SRC, TGT, "Two dogs play in the snow.", "Zwei Hunde spielen im Schnee."] * 20
    plain = Tokenizer.load(train_tokenizer(lines, tmp_path / "plain.model", 400))
    hinted_model = Tokenizer.load(
        train_tokenizer(lines, tmp_path / "hinted.model", 400, user_defined_symbols=list(TERM_PIECES))
    )
    assert term_pieces(plain) == () and term_piece_ids(plain) == ()
    assert term_pieces(hinted_model) == TERM_PIECES
    ids = term_piece_ids(hinted_model)
    assert len(set(ids)) == 3 and hinted_model.encode([hint("dog", "Hund")])[0].count(ids[0]) == 1


class Links:
    """TermLinks' interface over a list: every training sentence has LINKS."""

    def links(self, index: int) -> list[tuple[int, int]]:
        return list(LINKS)


def test_a_batch_gets_hints_behind_its_leading_ids_from_a_seed_of_its_own(tmp_path: Path) -> None:
    lines = [SRC, TGT] * 10
    tokenizer = Tokenizer.load(
        train_tokenizer(lines, tmp_path / "spm.model", 330, user_defined_symbols=[">>de<<", *TERM_PIECES])
    )
    lead = tokenizer.encode([">>de<<"])[0]
    src = [np.asarray(lead + ids, np.uint16) for ids in tokenizer.encode([SRC] * 8)]
    tgt = [np.asarray(ids, np.uint16) for ids in tokenizer.encode([TGT] * 8)]
    indices = np.arange(8)
    hints = TermHints(TermHintsConfig(probability=0.5, max_terms=2, replace=0.0), Links(), TERM_PIECES)
    modifiers = ModifiersConfig(upper_case=0.5)

    def modified(with_hints: bool, position: int) -> tuple[list[str], list[str]]:
        batch = BatchModifier(
            tokenizer, modifiers, np.ones(8, np.int64), 1, 0, 1024, hints=hints if with_hints else None
        )
        out_src, out_tgt, rows = batch.modify(src, tgt, indices, position=position, epoch=1)
        assert rows.tolist() == list(range(8)) and all(seq[0] == lead[0] for seq in out_src)
        return tokenizer.decode([seq[1:].tolist() for seq in out_src]), tokenizer.decode([s.tolist() for s in out_tgt])

    hinted_lines = 0
    for position in range(6):
        with_hints, without = modified(True, position), modified(False, position)
        assert with_hints == modified(True, position)  # (seed, epoch, rank, position) alone
        assert with_hints[1] == without[1]  # targets untouched; capitals drawn as without hints
        for text, plain in zip(*(side[0] for side in (with_hints, without))):
            assert HINT.sub(lambda m: m.group(1), text) == plain
            hinted_lines += bool(HINT.search(text))
    assert 0 < hinted_lines < 48
