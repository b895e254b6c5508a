"""The one-way import rule of STYLE.md, checked by parsing every module's imports with ast."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "mtkit"
LAYER0 = {"errors", "console", "files", "readahead"}
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "console": set(),
    "files": {"errors"},
    "readahead": set(),
    "tokenizer": {"files", "errors"},
    "data": {"files", "errors", "readahead", "batching"},
    "score": {"files", "errors"},
    "checkpoint": {"files", "errors"},
    "batching": set(),
    "model": set(),
    "search": set(),
    "loss": set(),
    "packed": set(),
    "distributed": set(),
    "monitor": {"errors"},
    "rundir": {"checkpoint", "tokenizer"} | LAYER0,
    "preprocess": {"tokenizer", "data", "batching"} | LAYER0,
    "step": {"search", "tokenizer", "data", "score", "loss", "distributed"},
    "train": {"model", "step", "data", "batching", "checkpoint", "rundir", "loss", "distributed", "monitor"} | LAYER0,
    "translate": {"model", "packed", "search", "tokenizer", "data", "batching", "checkpoint", "score"} | LAYER0,
    "recipe": {"model", "preprocess", "train", "search"} | LAYER0,
    "export": {"translate", "checkpoint", "model", "tokenizer"} | LAYER0,
    "serve": {"translate", "checkpoint", "model", "tokenizer"} | LAYER0,
    "cli": {"*"},
    "__main__": {"cli"},
    "__init__": set(),
}


def mtkit_imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mtkit"):
            names.add(node.module.split(".")[1] if "." in node.module else "__init__")
        elif isinstance(node, ast.Import):
            names.update(a.name.split(".")[1] for a in node.names if a.name.startswith("mtkit."))
    return names


@pytest.mark.parametrize("path", sorted(PACKAGE.glob("*.py")), ids=lambda p: p.stem)
def test_imports_point_down(path: Path) -> None:
    assert path.stem in ALLOWED, f"{path.stem}: new module, add its layer to tests/test_layering.py"
    allowed = ALLOWED[path.stem]
    if "*" in allowed:
        return
    bad = mtkit_imports(path) - allowed - {path.stem, "__init__"}
    assert not bad, f"{path.stem} must not import {sorted(bad)}"


def test_nothing_imports_cli_or_recipes() -> None:
    for path in PACKAGE.glob("*.py"):
        if path.stem in ("cli", "__main__"):
            continue
        assert "cli" not in mtkit_imports(path), path.stem


def test_recipes_are_data_not_code(tmp_path: Path) -> None:
    """As torchtune's test_import_recipes: the installed package cannot import the recipes folder."""
    import subprocess
    import sys

    for path in PACKAGE.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        modules += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        assert not any(m and m.split(".")[0] == "recipes" for m in modules), path.stem
    run = subprocess.run([sys.executable, "-c", "import recipes"], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode != 0 and "ModuleNotFoundError" in run.stderr
