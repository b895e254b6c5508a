"""Bulk jobs sharded over processes (mtkit.bulk.shards, mtkit.bulk.shard_sets, `--shard K/N`, `mtkit merge-shards`).

The tests named `test_pure_*` need no model: the line ranges, the option and the environment variables, the files'
names, reading a range, and a set's records, completion check and merge on hand-written shard files. The others run
each bulk command as three shards, one after the other, with the tiny models of tests/conftest.py: the last shard
merges the set into the bytes one process writes; a missing, mismatched or interrupted shard is handled. The
jobs over pairs (distill, score-pairs, filter-pairs) are tests/bulk/test_pair_shards.py's."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import torch

from mtkit.bulk.shard_sets import Shard, merge_lock, merge_set
from mtkit.bulk.shards import (
    ShardSpec,
    line_range,
    parse_shard,
    read_line_range,
    resolve_shard,
    shard_file,
    shard_from_environ,
)
from mtkit.corpus.sharding import numbers
from mtkit.errors import UserError
from tests.bulk.test_synthetic import interrupt_after
from tests.conftest import read_gz_lines, run_mtkit_in_process

# --- pure: no model ---------------------------------------------------------------------------------------------


def test_pure_ranges_cover_every_line_once_in_order() -> None:
    for total in range(0, 41):
        for count in (1, 2, 3, 7, 40, 41, 60):
            for align in (1, 3, 8):
                ranges = [line_range(total, count, index, align) for index in range(count)]
                assert ranges[0][0] == 0 and ranges[-1][1] == total, (total, count, align)
                assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:])), ranges  # contiguous, no overlap
                assert all(start <= end for start, end in ranges)
                assert all(start % align == 0 or start == total for start, _ in ranges)  # on a chunk boundary
                if align == 1:  # the plain split: [floor(k * L / N), floor((k + 1) * L / N))
                    assert ranges == [(k * total // count, (k + 1) * total // count) for k in range(count)]
    assert line_range(10, 3, 0) == (0, 3) and line_range(10, 3, 2) == (6, 10)
    assert [line_range(10, 4, k, 4) for k in range(4)] == [(0, 0), (0, 4), (4, 8), (8, 10)]  # 3 chunks, 4 shards
    assert ShardSpec(2, 3).line_range(20, 4) == (4, 12)


def test_pure_the_option_counts_from_one_and_refuses_what_is_not_k_of_n() -> None:
    assert parse_shard("2/3") == ShardSpec(2, 3, "--shard 2/3")
    assert (parse_shard(" 3 / 3 ").index, parse_shard(" 3 / 3 ").count) == (3, 3)
    for bad, words in [
        ("0/3", "shards count from 1, 1/3 to 3/3"),
        ("4/3", "shard 4 of 3"),
        ("1/0", "0 shards: at least 1"),
        ("3", "K/N, shard K of N counted from 1"),
        ("a/b", "K/N"),
        ("-1/3", "K/N"),
        ("1/2/3", "K/N"),
    ]:
        with pytest.raises(UserError, match="--shard") as error:
            parse_shard(bad)
        assert words in str(error.value) and "\n" not in str(error.value)
    assert resolve_shard("1/1", {"RANK": "1", "WORLD_SIZE": "4"}) is None  # 1/1: the whole input, whatever the env
    assert resolve_shard("2/5", {"RANK": "1", "WORLD_SIZE": "4"}) == ShardSpec(2, 5, "--shard 2/5")  # the option wins
    assert resolve_shard(None, {}) is None


def test_pure_the_environment_gives_the_shard() -> None:
    assert shard_from_environ({"RANK": "0", "WORLD_SIZE": "4"}) == ShardSpec(1, 4, "RANK/WORLD_SIZE")
    assert shard_from_environ({"RANK": "3", "WORLD_SIZE": "4"}).index == 4  # type: ignore[union-attr]
    assert resolve_shard(None, {"RANK": "0", "WORLD_SIZE": "1"}) is None  # one process: no shard
    slurm = {"SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_MAX": "4"}
    for task, index in (("1", 1), ("4", 4)):  # --array=1-4
        assert shard_from_environ({**slurm, "SLURM_ARRAY_TASK_ID": task}) == ShardSpec(
            index, 4, "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT"
        )
    from_zero = {**slurm, "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_ID": "0"}  # --array=0-3
    assert shard_from_environ(from_zero).index == 1  # type: ignore[union-attr]
    stepped = {"SLURM_ARRAY_TASK_ID": "9", "SLURM_ARRAY_TASK_MIN": "5", "SLURM_ARRAY_TASK_STEP": "2"}
    assert shard_from_environ({**stepped, "SLURM_ARRAY_TASK_COUNT": "3"}).index == 3  # type: ignore[union-attr]
    both = {**slurm, "SLURM_ARRAY_TASK_ID": "2", "RANK": "1", "WORLD_SIZE": "2"}  # task 2 of 4 runs torchrun of 2
    assert (shard_from_environ(both).index, shard_from_environ(both).count) == (4, 8)  # type: ignore[union-attr]
    assert resolve_shard(None, {"PATH": "/bin"}) is None


@pytest.mark.parametrize(
    ("environ", "named"),
    [
        ({"RANK": "x", "WORLD_SIZE": "2"}, "RANK='x': not a whole number"),
        ({"RANK": "-1", "WORLD_SIZE": "2"}, "RANK='-1'"),
        ({"RANK": "1"}, "WORLD_SIZE is not set but RANK is"),
        ({"WORLD_SIZE": "2"}, "RANK is not set but WORLD_SIZE is"),
        ({"RANK": "2", "WORLD_SIZE": "2"}, "RANK=2: not below WORLD_SIZE=2"),
        ({"SLURM_ARRAY_TASK_ID": "3"}, "SLURM_ARRAY_TASK_ID=3 without SLURM_ARRAY_TASK_COUNT"),
        ({"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "1"}, "ids"),
        ({"SLURM_ARRAY_TASK_ID": "0", "SLURM_ARRAY_TASK_COUNT": "4", "SLURM_ARRAY_TASK_MIN": "1"}, "ids"),
        ({"SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_COUNT": "3", "SLURM_ARRAY_TASK_MIN": "1"}, "ids"),  # 1,4,9
        ({"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "two", "SLURM_ARRAY_TASK_MIN": "1"}, "COUNT='two'"),
    ],
)
def test_pure_a_bad_variable_is_one_line_naming_it(environ: dict[str, str], named: str) -> None:
    with pytest.raises(UserError) as error:
        resolve_shard(None, environ)
    message = str(error.value)
    assert named in message and "--shard K/N" in message and "\n" not in message, message


def test_pure_file_names_sort_and_say_k_of_n() -> None:
    assert ShardSpec(2, 3).label == "shard-00002-of-00003"
    assert shard_file(Path("out/bt.de"), ShardSpec(2, 3)) == Path("out/bt.de.shard-00002-of-00003")
    assert ShardSpec(7, 123456).label == "shard-000007-of-123456"
    labels = [ShardSpec(index, 12).label for index in range(1, 13)]
    assert sorted(labels) == labels
    assert numbers([2, 4, 5, 6, 9]) == "2, 4-6, 9" and numbers([3]) == "3"


def test_pure_a_range_is_read_as_read_lines_reads_it(tmp_path: Path) -> None:
    lines = [f"Zeile {i}" for i in range(10)]
    raw = "".join(f"{line}\r\n" if i == 4 else f"{line}\n" for i, line in enumerate(lines)).encode()
    raw = raw.replace(b"Zeile 7", b"Zeile \xff7")  # invalid UTF-8 on line 8 (counted from 1)
    plain, packed = tmp_path / "in.txt", tmp_path / "in.txt.gz"
    plain.write_bytes(raw)
    packed.write_bytes(gzip.compress(raw))
    for path in (plain, packed):
        assert list(read_line_range(path, 2, 6)) == lines[2:6]  # the CRLF of line 5 removed
        assert list(read_line_range(path, 8, None)) == lines[8:]  # the bad line before is never decoded
        assert list(read_line_range(path, 10, 12)) == []
        with pytest.raises(UserError, match=r"in\.txt(\.gz)?:8: invalid UTF-8"):
            list(read_line_range(path, 5, 9))
        assert list(read_line_range(path, 7, 8, "replace")) == ["Zeile \ufffd7"]


def fake_shard(folder: Path, index: int, count: int, lines: list[str], align: int = 1, **identity: str) -> Shard:
    """Shard `index` of `count` of a job writing OUT.a (the lines) and OUT.b (them in capitals), not yet run."""
    return Shard(
        folder / "out",
        ShardSpec(index, count),
        [folder / "out.a", folder / "out.b"],
        "test",
        {"model": "m", **identity},
        len(lines),
        align,
    )


def run_fake(shard: Shard, lines: list[str]) -> dict:
    """What a command does with its shard: record it started, write its lines, finish it (merging a complete set)."""
    shard.begin()
    part = lines[shard.start : shard.end]
    shard.files[0].write_text("".join(f"{line}\n" for line in part), encoding="utf-8")
    shard.files[1].write_text("".join(f"{line.upper()}\n" for line in part), encoding="utf-8")
    return shard.finish()


LINES = [f"line {i}" for i in range(11)]


def test_pure_the_shard_that_completes_the_set_merges_it_in_order(tmp_path: Path) -> None:
    states = [run_fake(fake_shard(tmp_path, index, 3, LINES, align=2), LINES) for index in (3, 1, 2)]
    assert [state["waiting_for"] for state in states[:2]] == [[1, 2], [2]]
    assert states[2]["merged"] == [str(tmp_path / "out.a"), str(tmp_path / "out.b")]
    assert states[2]["lines"] == [4, 8] and states[2]["shard"] == "2/3"
    assert (tmp_path / "out.a").read_text() == "".join(f"{line}\n" for line in LINES)
    assert (tmp_path / "out.b").read_text() == "".join(f"{line.upper()}\n" for line in LINES)
    assert sorted(path.name for path in tmp_path.iterdir()) == [".out.merge.lock", "out.a", "out.b"]  # shards gone


def test_pure_merge_names_the_missing_and_unfinished_shards(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"out: no shards to merge \(no .*out\.shard-K-of-N\.json\)"):
        merge_set(tmp_path / "out")
    for index in (1, 3):
        run_fake(fake_shard(tmp_path, index, 6, LINES), LINES)
    fake_shard(tmp_path, 6, 6, LINES).begin()  # started, never finished
    with pytest.raises(UserError) as error:
        merge_set(tmp_path / "out")
    assert str(error.value) == (
        f"{tmp_path / 'out'}: a set of 6 shards, 2, 4-5 missing and 6 not finished; run them, then merge again"
    )
    assert not (tmp_path / "out.a").exists()


def test_pure_merge_refuses_a_set_made_otherwise(tmp_path: Path) -> None:
    run_fake(fake_shard(tmp_path, 1, 3, LINES, seed="5"), LINES)
    run_fake(fake_shard(tmp_path, 3, 3, LINES, seed="5"), LINES)
    with pytest.raises(UserError, match=r"shard 2 of 3 was made with another seed than shard 1"):
        run_fake(fake_shard(tmp_path, 2, 3, LINES, seed="6"), LINES)  # the shard that completes it is refused
    assert not (tmp_path / "out.a").exists()
    with pytest.raises(UserError, match=r"shard 2 of 3 was made with another seed than shard 1"):
        merge_set(tmp_path / "out")
    assert run_fake(fake_shard(tmp_path, 2, 3, LINES, seed="5"), LINES)["merged"]  # run again as the others ran

    run_fake(fake_shard(tmp_path, 1, 2, LINES), LINES)
    run_fake(fake_shard(tmp_path, 2, 3, LINES[:5]), LINES[:5])
    with pytest.raises(UserError, match=r"records of sets of 2 and 3 shards; remove the files of the set not wanted"):
        merge_set(tmp_path / "out")


def test_pure_a_set_left_to_another_merger_is_merged_by_hand_and_checked(tmp_path: Path) -> None:
    name = tmp_path / "out"
    run_fake(fake_shard(tmp_path, 1, 2, LINES), LINES)
    with merge_lock(name):  # another shard of the set is merging it: this one leaves it
        state = run_fake(fake_shard(tmp_path, 2, 2, LINES), LINES)
    assert state["merged"] is None and state["waiting_for"] == []
    assert fake_shard(tmp_path, 2, 2, LINES).already_done()  # run again (a requeued task), it has nothing to do
    assert not fake_shard(tmp_path, 2, 2, LINES, seed="1").already_done()  # another job's
    with open(shard_file(tmp_path / "out.b", ShardSpec(1, 2)), "ab") as handle:
        handle.write(b"more")
    with pytest.raises(UserError, match=r"out\.b\.shard-00001-of-00002: \d+ bytes, its record says \d+ bytes"):
        merge_set(name)
    run_fake(fake_shard(tmp_path, 1, 2, LINES), LINES)  # shard 1 again completes the set
    assert (tmp_path / "out.a").read_text() == "".join(f"{line}\n" for line in LINES)
    run_fake(fake_shard(tmp_path, 1, 2, LINES), LINES)
    with merge_lock(name):
        run_fake(fake_shard(tmp_path, 2, 2, LINES), LINES)
    merged = merge_set(name, keep_shards=True)
    assert merged["merged"] == [str(tmp_path / "out.a"), str(tmp_path / "out.b")] and merged["record"]["shards"] == 2
    assert shard_file(tmp_path / "out.a", ShardSpec(2, 2)).is_file()  # kept as asked


def test_pure_a_damaged_record_is_one_line(tmp_path: Path) -> None:
    run_fake(fake_shard(tmp_path, 1, 2, LINES), LINES)
    (tmp_path / "out.shard-00002-of-00002.json").write_text("{not json")
    with pytest.raises(UserError, match=r"out\.shard-00002-of-00002\.json: not a shard record"):
        merge_set(tmp_path / "out")


# --- integration: the commands with the tiny models (tests/conftest.py) -----------------------------------------


@pytest.fixture(scope="module")
def english(tmp_path_factory: pytest.TempPathFactory, multi30k: Path) -> Path:
    """20 English lines of Multi30k's test set, one empty."""
    lines = read_gz_lines(multi30k / "test_2016_flickr.en.gz", 19)
    lines[6:6] = [""]
    path = tmp_path_factory.mktemp("english") / "in.en"
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def mtkit_ok(*args: object) -> str:
    done = run_mtkit_in_process(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def shards_left(folder: Path) -> list[str]:
    """The shards' files and records in `folder` (not the hidden lock files)."""
    return sorted(path.name for path in folder.iterdir() if ".shard-" in path.name and not path.name.startswith("."))


def run_three_shards(*command: object) -> list[str]:
    """`mtkit COMMAND --shard K/3` for K = 1, 2, 3, one after the other; what each printed."""
    return [mtkit_ok(*command, "--shard", f"{index}/3") for index in (1, 2, 3)]


@pytest.mark.parametrize("options", [(), ("--nbest", "2", "--scores")])
def test_translate_shards_merge_into_what_one_process_writes(
    tiny_run: Path, english: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: tuple[str, ...]
) -> None:
    """Chunks of 4 lines (mtkit translate's CHUNK_LINES, 2,000, made small): shards of lines 1-4, 5-12, 13-20. The
    n-best rows carry each line's number in the whole input."""
    monkeypatch.setattr("mtkit.engines.streaming.CHUNK_LINES", 4)
    common = ("translate", tiny_run, "--device", "cpu", "--beam", "2", "-q", "-i", english, *options)
    mtkit_ok(*common, "-o", tmp_path / "whole.de")
    printed = run_three_shards(*common, "-o", tmp_path / "out.de")
    assert "shard 1/3: lines 1-4; the set waits for shard 2-3" in printed[0]
    assert "shard 2/3: lines 5-12; the set waits for shard 3" in printed[1]
    assert f"the set is complete, merged into {tmp_path / 'out.de'}" in printed[2]
    assert (tmp_path / "out.de").read_bytes() == (tmp_path / "whole.de").read_bytes()
    assert shards_left(tmp_path) == []


def test_the_environment_gives_each_process_its_shard(
    tiny_run: Path, english: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Shard 1 by --shard, shard 2 as torchrun's rank 1 of 3, shard 3 as the third task of a Slurm array 1-3; chunks
    of one line, so the plain split: lines 1-6, 7-13, 14-20."""
    monkeypatch.setattr("mtkit.engines.streaming.CHUNK_LINES", 1)
    common = ("translate", tiny_run, "--device", "cpu", "-q", "-i", english)
    mtkit_ok(*common, "-o", tmp_path / "whole.de")
    mtkit_ok(*common, "-o", tmp_path / "out.de", "--shard", "1/3")
    with monkeypatch.context() as env:
        env.setenv("RANK", "1")
        env.setenv("WORLD_SIZE", "3")
        assert "shard 2/3: lines 7-13" in mtkit_ok(*common, "-o", tmp_path / "out.de")
        chosen = run_mtkit_in_process(*common, "-o", tmp_path / "other.de", "--shard", "2/2")  # --shard wins
        assert chosen.returncode == 0 and (tmp_path / "other.de.shard-00002-of-00002").is_file()
    with monkeypatch.context() as env:
        for name, value in (("ID", "3"), ("MIN", "1"), ("MAX", "3"), ("COUNT", "3")):
            env.setenv(f"SLURM_ARRAY_TASK_{name}", value)
        assert "merged into" in mtkit_ok(*common, "-o", tmp_path / "out.de")
        env.setenv("SLURM_ARRAY_TASK_ID", "4")
        bad = run_mtkit_in_process(*common, "-o", tmp_path / "bad.de")
        assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
            "error: SLURM_ARRAY_TASK_ID=4: not one of the 3 ids SLURM_ARRAY_TASK_MIN=1 + k * SLURM_ARRAY_TASK_STEP=1; "
            "give --shard K/N"
        ]
    assert (tmp_path / "out.de").read_bytes() == (tmp_path / "whole.de").read_bytes()
    for bad_option, words in (("4/3", "--shard 4/3: shard 4 of 3"), ("2-3", "--shard '2-3': K/N")):
        refused = run_mtkit_in_process(*common, "-o", tmp_path / "x.de", "--shard", bad_option)
        assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1 and words in refused.stderr
    to_stdout = run_mtkit_in_process("translate", tiny_run, "-i", english, "--shard", "1/2")
    assert to_stdout.returncode == 2 and "--shard 1/2: give --input and --output" in to_stdout.stderr


def test_merge_shards_names_a_missing_shard_then_merges_by_hand(
    tiny_run: Path, english: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("mtkit.engines.streaming.CHUNK_LINES", 4)
    common = ("translate", tiny_run, "--device", "cpu", "-q", "-i", english)
    mtkit_ok(*common, "-o", tmp_path / "whole.de")
    out = tmp_path / "out.de"
    for index in (1, 3):
        mtkit_ok(*common, "-o", out, "--shard", f"{index}/3")
    missing = run_mtkit_in_process("merge-shards", out)
    assert missing.returncode == 2 and missing.stderr.strip().splitlines() == [
        f"error: {out}: a set of 3 shards, 2 missing; run them, then merge again"
    ]
    other = run_mtkit_in_process(*common, "-o", out, "--shard", "2/3", "--beam", "3")  # completes it, made otherwise
    assert other.returncode == 2 and "shard 2 of 3 was made with another beam than shard 1" in other.stderr
    assert not out.exists()
    with merge_lock(out):  # as when another shard is merging the set: this one leaves it
        note = mtkit_ok(*common, "-o", out, "--shard", "2/3")
    assert "another shard merges the set" in note and not out.exists()
    merged = json.loads(mtkit_ok("merge-shards", out, "--json").splitlines()[0])
    assert merged == {"merged": [str(out)], "shards": 3, "lines": 20}
    assert out.read_bytes() == (tmp_path / "whole.de").read_bytes() and shards_left(tmp_path) == []


def test_a_translate_shard_stopped_part_way_goes_on(
    tiny_run: Path, english: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Shard 2 (lines 5-12, two chunks of 4) stopped after its first chunk, with bytes of its second written past
    what its progress file records (a kill inside a write), goes on from line 9; the set is one process's bytes."""
    monkeypatch.setattr("mtkit.engines.streaming.CHUNK_LINES", 4)
    common = ("translate", tiny_run, "--device", "cpu", "-q", "-i", english)
    mtkit_ok(*common, "-o", tmp_path / "whole.de")
    out = tmp_path / "out.de"
    with monkeypatch.context() as patch:
        interrupt_after(patch, 1)
        assert run_mtkit_in_process(*common, "-o", out, "--shard", "2/3").returncode == 130
    with open(shard_file(out, ShardSpec(2, 3)), "ab") as handle:
        handle.write(b"halbe Zei")
    assert "going on after line 8" in mtkit_ok(*common, "-o", out, "--shard", "2/3")
    mtkit_ok(*common, "-o", out, "--shard", "1/3", "--beam", "1")
    assert "lines 1-4" in mtkit_ok(*common, "-o", out, "--shard", "1/3")  # a done shard of another job: run again
    mtkit_ok(*common, "-o", out, "--shard", "3/3")
    assert out.read_bytes() == (tmp_path / "whole.de").read_bytes()


def test_a_done_translate_shard_with_its_glossary_rewritten_is_run_again(
    tiny_run: Path, english: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The glossary is part of a shard's job by its contents (path, size and time), not its path alone: shard 1 of 2
    (lines 1-10, chunks of one line), done with one glossary and asked again with the file rewritten, translates
    again with the new target where before it had nothing to do."""
    monkeypatch.setattr("mtkit.engines.streaming.CHUNK_LINES", 1)
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("man\tKerlchen\n", encoding="utf-8")
    out = tmp_path / "out.de"
    common = ("translate", tiny_run, "--device", "cpu", "-q", "-i", english, "-o", out, "--glossary", glossary)
    assert "shard 1/2: lines 1-10" in mtkit_ok(*common, "--shard", "1/2")
    shard = shard_file(out, ShardSpec(1, 2))
    assert "Kerlchen" in shard.read_text(encoding="utf-8")
    glossary.write_text("man\tMannsbild\n", encoding="utf-8")
    assert "shard 1/2: lines 1-10" in mtkit_ok(*common, "--shard", "1/2")
    text = shard.read_text(encoding="utf-8")
    assert "Mannsbild" in text and "Kerlchen" not in text


def test_back_translate_shards_sample_what_one_process_samples(
    tiny_run: Path, english: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sampling with a seed on torch, chunks of 3 lines: each shard starts on a chunk of the whole input and draws
    from that chunk's seed. Shard 2 stopped after a chunk goes on; the last shard merges both outputs."""
    common = ("back-translate", tiny_run, "-i", english, "--engine", "torch", "--device", "cpu", "--seed", "5")
    common += ("--top-k", "10", "--chunk-lines", "3", "--json")
    whole = json.loads(mtkit_ok(*common, "-o", tmp_path / "whole").splitlines()[0])
    assert whole["read"] == 20 and "shard" not in whole
    with monkeypatch.context() as patch:
        interrupt_after(patch, 1)
        assert run_mtkit_in_process(*common, "-o", tmp_path / "bt", "--shard", "2/3").returncode == 130
    printed = run_three_shards(*common, "-o", tmp_path / "bt")
    first, second, last = (json.loads(text.splitlines()[0]) for text in printed)
    assert (first["shard"], first["lines"], first["merged"], first["waiting_for"]) == ("1/3", [0, 6], None, [2, 3])
    assert (second["lines"], second["resumed_from"], second["written"]) == ([6, 12], 3, 3)
    assert last["merged"] == [str(tmp_path / "bt.de"), str(tmp_path / "bt.en")]
    for lang in ("de", "en"):
        assert (tmp_path / f"bt.{lang}").read_bytes() == (tmp_path / f"whole.{lang}").read_bytes()
    assert shards_left(tmp_path) == []
    again = run_mtkit_in_process(*common, "-o", tmp_path / "bt", "--shard", "2/3")  # the set is merged
    assert again.returncode == 2 and "bt.de exists and no" in again.stderr
    # A shard on another thread count could sample other tokens (a GEMM's rounding): the set is refused.
    mtkit_ok(*common, "-o", tmp_path / "mixed", "--shard", "1/2")
    threads = torch.get_num_threads()
    torch.set_num_threads(threads + 1)
    try:
        mixed = run_mtkit_in_process(*common, "-o", tmp_path / "mixed", "--shard", "2/2")
    finally:
        torch.set_num_threads(threads)
    assert mixed.returncode == 2 and "shard 2 of 2 was made with another threads than shard 1" in mixed.stderr
