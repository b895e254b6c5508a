"""mtkit.corpus.sharding on hand-made names: a set's shards found beside NAME whatever their suffix, and the one check
of a set (one set, one size, none missing) with the messages a preprocess join and a bulk merge give."""

from __future__ import annotations

from pathlib import Path

import pytest

from mtkit.corpus.sharding import check_complete, find_set, numbers, set_size, shard_path
from mtkit.errors import UserError


def test_a_set_is_found_by_its_suffix_beside_its_name(tmp_path: Path) -> None:
    name = tmp_path / "out"
    for index in (1, 2):
        shard_path(name, index, 3).mkdir()
        shard_path(name, index, 3, ".json").write_text("{}")
    shard_path(name, 1, 3, ".progress.json").write_text("{}")  # neither the directory nor the record
    shard_path(tmp_path / "out.a", 1, 3).write_text("")  # another name's
    assert find_set(name) == {(1, 3): shard_path(name, 1, 3), (2, 3): shard_path(name, 2, 3)}
    assert sorted(find_set(name, ".json")) == [(1, 3), (2, 3)]
    assert find_set(tmp_path / "nowhere" / "out") == {}


def test_the_check_names_what_is_missing_one_way_or_the_other(tmp_path: Path) -> None:
    name = tmp_path / "data"
    with pytest.raises(UserError, match=r"data: no shards to join \(no data\.shard-K-of-N/\)"):
        set_size(name, {}, "join", "shard directories", "data.shard-K-of-N/")
    with pytest.raises(UserError, match=r"data: records of sets of 2 and 3 shards; remove the files of the set not"):
        set_size(name, {(1, 2): name, (1, 3): name}, "merge", "records", "")
    assert set_size(name, {(1, 3): name, (3, 3): name}, "merge", "records", "") == 3
    with pytest.raises(UserError) as error:
        check_complete(name, 3, {1}, "join", "preprocess it", by_name=True)
    assert str(error.value) == (
        f"{name}: a set of 3 shards, data.shard-00002-of-00003, data.shard-00003-of-00003 missing; preprocess it, "
        "then join again"
    )
    with pytest.raises(UserError) as error:
        check_complete(name, 6, {1, 3, 6}, "merge", "run them", unfinished=[6])
    assert (
        str(error.value) == f"{name}: a set of 6 shards, 2, 4-5 missing and 6 not finished; run them, then merge again"
    )
    check_complete(name, 2, {1, 2}, "merge", "run them")
    assert numbers([9, 2, 4, 5, 6]) == "2, 4-6, 9"
