"""mtkit/memory/index_files.py: an index saved and opened answers every query exactly as the one built from the
pairs (same score, segment, source, target and translation), its arrays mapped rather than read; a folder of another
format, key version, memory or size, or damaged, opens as missing; a second save of the same memory keeps the first;
a save leaves no temporary folder behind."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from mtkit.memory import index_files
from mtkit.memory.index_files import open_index, remove_index, save_index
from mtkit.memory.matching import MemoryIndex, normalised
from tests.conftest import read_gz_lines

EDGES = [
    ("Delete {count} files from 3 folders.", "{count} Dateien aus 3 Ordnern löschen."),
    ("  Grüße   aus Köln!  ", "Greetings from Cologne!"),
    ("", "an empty source"),
    ("A dog runs in the snow.", "Ein Hund rennt im Schnee."),
    ("A dog runs in the snow.", "A later duplicate: the first one stands."),
]


@pytest.fixture(scope="module")
def pairs(multi30k: Path) -> list[tuple[str, str]]:
    sources = read_gz_lines(multi30k / "train.en.gz", 3000)
    targets = read_gz_lines(multi30k / "train.de.gz", 3000)
    return EDGES + list(zip(sources, targets))


def queries(pairs: list[tuple[str, str]]) -> list[str]:
    """Exact sources, sources with a word dropped or changed, numbers changed, and sentences of no segment."""
    rng = random.Random(3)
    found = [" A dog  runs in the snow. ", "Delete {n} files from 12 folders.", "Grüße aus Köln!", "nothing alike"]
    for source, _ in rng.sample(pairs, 150):
        words = source.split()
        found.append(source)
        if len(words) > 3:
            cut = rng.randrange(len(words))
            found.append(" ".join(words[:cut] + words[cut + 1 :]))
            found.append(" ".join(words[:cut] + ["purple"] + words[cut + 1 :]))
    return found


def test_a_saved_index_answers_as_the_built_one(pairs: list[tuple[str, str]], tmp_path: Path) -> None:
    built = MemoryIndex(pairs, "m-1")
    assert save_index(built, tmp_path / "m-1")
    opened = open_index(tmp_path / "m-1", "m-1", len(pairs))
    assert opened is not None and len(opened) == len(built) == len(pairs) and opened.memory_id == "m-1"
    assert not isinstance(opened.arrays.sources, bytes)  # mapped, not read
    assert list(opened.sources) == list(built.sources) == [normalised(source) for source, _ in pairs]
    assert opened.targets[-1] == built.targets[-1] == pairs[-1][1] and opened.targets[1:3] == [t for _, t in EDGES[1:3]]
    found = 0
    for query in queries(pairs):
        for threshold in (50, 75, 90):
            answer = built.best(query, threshold)
            assert opened.best(query, threshold) == answer, (query, threshold)
            found += answer is not None
    assert found > 300  # the queries meet exact and fuzzy matches, not only misses
    assert [p for p in tmp_path.iterdir()] == [tmp_path / "m-1"]  # no temporary folder left


def test_a_stale_or_damaged_index_opens_as_missing(
    pairs: list[tuple[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "m-2"
    assert open_index(folder, "m-2", len(pairs)) is None  # never saved
    assert save_index(MemoryIndex(pairs, "m-2"), folder)
    assert not save_index(MemoryIndex(pairs[:5], "m-2"), folder)  # saved first by another process: kept
    assert open_index(folder, "m-2", len(pairs)) is not None
    assert open_index(folder, "m-3", len(pairs)) is None and open_index(folder, "m-2", 5) is None
    monkeypatch.setattr(index_files, "FORMAT", index_files.FORMAT + 1)
    assert open_index(folder, "m-2", len(pairs)) is None
    monkeypatch.undo()
    meta = json.loads((folder / index_files.META).read_text())
    (folder / index_files.META).write_text(json.dumps(meta | {"keys": "other patterns"}))
    assert open_index(folder, "m-2", len(pairs)) is None
    (folder / index_files.META).write_text(json.dumps(meta))
    np.save(folder / "postings.npy", np.zeros(3, dtype=np.int32))
    (folder / "starts.npy").write_bytes(b"not an array")
    assert open_index(folder, "m-2", len(pairs)) is None
    remove_index(folder)
    assert not folder.exists()
    remove_index(folder)  # none there is fine


def test_loaded_in_milliseconds_whatever_its_size(pairs: list[tuple[str, str]], tmp_path: Path) -> None:
    """Opening maps the files: nothing is read or decoded in proportion to the memory (asserted as no array being
    a copy in memory, not timed)."""
    save_index(MemoryIndex(pairs, "m-4"), tmp_path / "m-4")
    opened = open_index(tmp_path / "m-4", "m-4", len(pairs))
    assert opened is not None
    for name in ("postings", "terms", "starts", "keys", "source_offsets", "posting_lengths"):
        array = getattr(opened.arrays, name)
        assert not array.flags.owndata and not array.flags.writeable, name
