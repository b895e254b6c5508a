"""mtkit.search.config: the GNMT length penalty and the per-sentence maximum length, computed by hand; TranslateConfig
refuses values no search can use."""

from __future__ import annotations

import dataclasses

import pytest

from mtkit.errors import UserError
from mtkit.search.config import SearchOverrides, TranslateConfig, length_penalty, max_length


def test_length_penalty_by_hand() -> None:
    assert length_penalty(1, 1.0) == 1.0  # (5 + 1) / 6
    assert length_penalty(7, 1.0) == 2.0  # (5 + 7) / 6
    assert length_penalty(19, 0.5) == pytest.approx(2.0)  # sqrt(24 / 6)
    assert length_penalty(13, 2.0) == pytest.approx(9.0)  # (18 / 6) ** 2
    assert length_penalty(123, 0.0) == 1.0  # alpha 0: no penalty


def test_length_penalty_prefers_longer_hypotheses_as_alpha_grows() -> None:
    """The same mean log-prob per token: a larger alpha ranks the longer hypothesis higher."""
    short, long = -2.0 / length_penalty(2, 1.0), -4.0 / length_penalty(4, 1.0)  # -2 / (7/6), -4 / (9/6)
    assert short == pytest.approx(-12 / 7) and long == pytest.approx(-8 / 3)
    assert -2.0 / length_penalty(2, 0.0) > -4.0 / length_penalty(4, 0.0)


def test_max_length_by_hand() -> None:
    assert max_length(10, 1.0, 50) == 60
    assert max_length(10, 1.5, 0) == 15
    assert max_length(3, 1.2, 1) == 4  # floor(3.6 + 1) = floor(4.6)
    assert max_length(0, 1.0, 0) == 0
    assert max_length(100, 1.0, 50, max_positions=128) == 127  # bos + 127 tokens predicts eos at the last position
    assert max_length(10, 1.0, 5, max_positions=128) == 15


def test_max_length_matches_float64_floor() -> None:
    """0.1 * 30 is 3.0000000000000004 in float64: the floor is 3, as torch's float64 arithmetic gives."""
    assert max_length(30, 0.1, 0) == 3


@pytest.mark.parametrize(
    "bad",
    [
        {"beam": 0},
        {"nbest": 0},
        {"batch_tokens": 0},
        {"workers": 0},
        {"beam": 2, "nbest": 3},
        {"max_len_a": -0.5},
        {"max_len_b": -1},
        {"top_k": -1},
        {"top_p": 0.0},
        {"top_p": 1.5},
        {"temperature": 0.0},
    ],
)
def test_translate_config_refuses_bad_values(bad: dict) -> None:
    """A UserError, one line, naming the [translate] key of the last field given (the one that is off)."""
    with pytest.raises(UserError, match=rf"^translate\.{list(bad)[-1]} ") as refused:
        TranslateConfig(**bad)
    assert "\n" not in str(refused.value)


def test_translate_config_allows_more_samples_than_beams_and_documents_every_field() -> None:
    assert TranslateConfig(sampling=True, beam=1, nbest=5).nbest == 5
    assert all(f.metadata.get("help") for f in dataclasses.fields(TranslateConfig))


def test_search_overrides_hold_each_translate_config_field_and_set_only_what_was_given() -> None:
    names = [f.name for f in dataclasses.fields(SearchOverrides)]
    assert names == [f.name for f in dataclasses.fields(TranslateConfig)] + ["reset"]
    assert SearchOverrides().changes() == {}
    assert SearchOverrides(beam=2, sampling=False, target_lang=None).changes() == {"beam": 2, "sampling": False}
    recipe = TranslateConfig(beam=6, target_lang="fr")
    asked = SearchOverrides(nbest=2, reset=("target_lang",))
    assert dataclasses.replace(recipe, **asked.changes()) == TranslateConfig(beam=6, nbest=2)
    with pytest.raises(UserError, match="^translate options: no such field beams$"):
        SearchOverrides(reset=("beams",))
