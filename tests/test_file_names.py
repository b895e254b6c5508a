"""mtkit.file_names: the name of every file mtkit writes in a data directory, a run directory and an export is spelled
there once, and no other module of mtkit spells one out as a string of its own (prose that names one, in a
docstring or a message, is not a file name)."""

from __future__ import annotations

import ast
from pathlib import Path

from mtkit import file_names
from mtkit.bulk.shards import ShardSpec
from mtkit.corpus.sharding import shard_path
from tests.conftest import ROOT

# Spellings that name another file than mtkit's, or no file: where, and why.
ELSEWHERE = {
    ("exports/marian.py", "config.json"): "a Hugging Face model directory's own config.json",
    ("cli/average_command.py", "checkpoints"): "a key of `mtkit average --json`",
}


def test_every_file_name_is_spelled_once_in_mtkit() -> None:
    names = {key: value for key, value in vars(file_names).items() if key.isupper()}
    assert len(set(names.values())) == len(names), "two constants name one file"
    spellings = set(names.values())
    found = []
    for path in sorted((ROOT / "mtkit").rglob("*.py")):
        where = path.relative_to(ROOT / "mtkit").as_posix()
        if where == "file_names.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in spellings:
                if (where, node.value) not in ELSEWHERE:
                    found.append(f"mtkit/{where}:{node.lineno}: {node.value!r}")
    assert found == [], "use the constant of mtkit.file_names"


def test_a_shard_is_labelled_alike_by_preprocess_and_the_bulk_commands() -> None:
    label = ShardSpec(2, 3).label
    assert label == "shard-00002-of-00003" and shard_path(Path("data"), 2, 3) == Path(f"data.{label}")
