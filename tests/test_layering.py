"""The one-way import rule of STYLE.md, checked by parsing every module's imports with ast: each module imports
only the layers below it, the real import graph (imports inside functions and under TYPE_CHECKING included) has
no circle, and the CTranslate2 path imports no torch."""

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
    "checkpoint": {"files", "errors", "runfiles"},
    "batching": set(),
    "model": {"layers", "kvcache"},
    "layers": set(),
    "kvcache": set(),
    "search": {"decoding", "search_step", "search_sampling"},
    "search_step": set(),
    "search_sampling": {"decoding", "search_step"},
    "decoding": set(),
    "runfiles": {"errors"},
    "stream": {"decoding", "engine", "tokenizer"} | LAYER0,
    "engine": {"decoding", "tokenizer"} | LAYER0,
    "engines": {"ct2cache", "ct2engine", "engine", "engine_config", "export", "translate"} | LAYER0,
    "ct2cache": {"runfiles", "interop"} | LAYER0,
    "interop": {"errors"},
    "forced": {"engine"} | LAYER0,
    "resumable": {"errors", "files"},
    "xent_filter": {"engine", "forced", "resumable"} | LAYER0,
    "backtranslate": {"engine", "engines", "resumable", "stream"} | LAYER0,
    "ct2engine": {"ct2cache", "decoding", "engine", "interop", "stream", "tokenizer"} | LAYER0,
    "loss": set(),
    "packed": set(),
    "precision": set(),
    "distributed": set(),
    "monitor": {"errors"},
    "rundir": {"checkpoint", "tokenizer"} | LAYER0,
    "preprocess": {"tokenizer", "data", "batching", "sources", "preprocess_config", "corpus_filters", "corpus_plan"} | LAYER0,
    "corpus_plan": {"errors", "preprocess_config", "sources"},
    "mixing": {"batching", "errors"},
    "train_data": {"console", "data", "mixing", "errors", "subword_sampling", "tokenizer"},
    "subword_sampling": {"errors"},
    "corpus_filters": {"console", "errors", "language_id"},
    "preprocess_config": {"errors", "files"},
    "sources": {"files", "errors"},
    "step": {"search", "tokenizer", "data", "batching", "score", "loss", "distributed"},
    "train": {"model", "step", "train_state", "data", "batching", "checkpoint", "rundir", "loss", "distributed", "monitor", "precision",
              "mixing", "train_data"} | LAYER0,
    "train_state": set(),
    "translate": {"precision", "runfiles", "model", "packed", "search", "decoding", "stream", "engine", "tokenizer", "data", "batching", "checkpoint", "score"} | LAYER0,
    "recipe": {"model", "preprocess_config", "train", "search"} | LAYER0,
    "export": {"translate", "checkpoint", "interop", "model", "tokenizer"} | LAYER0,
    "serve": {"api_keys", "decoding", "engine", "engines", "language_id", "libretranslate", "stream", "serve_config",
              "serve_libre", "serve_models", "serve_request", "serve_worker"} | LAYER0,
    "serve_libre": {"libretranslate", "markup", "serve_models", "serve_request", "stream"},
    "serve_models": {"decoding", "engine", "serve_request", "serve_worker", "stream"} | LAYER0,
    "libretranslate": {"serve_request"},
    "markup": set(),
    "api_keys": {"errors", "files", "serve_request"},
    "serve_config": {"decoding", "engine_config", "errors"},
    "engine_config": set(),
    "command": {"errors"} | LAYER0,
    "options": set(),
    "process": set(),
    "language_id": {"errors"},
    "serve_request": set(),
    "serve_worker": {"engine"} | LAYER0,
    "huggingface": {"engine", "export", "interop", "marian", "checkpoint", "model", "tokenizer", "search", "train"} | LAYER0,
    "marian": {"errors", "model"},
    "cli": {"*"},
    "cli_data": {"backtranslate", "command", "console", "decoding", "engine_config", "engines", "errors", "files",
                 "forced", "options", "preprocess_config", "process", "xent_filter"},
    "__main__": {"cli"},
    "__init__": set(),
}


def import_graph(package: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports anywhere in its file: at the top, inside functions, under
    TYPE_CHECKING. Every edge counts: a lazy import is still a dependency a reader must follow."""
    modules = {path.stem for path in package.glob("*.py")}
    return {path.stem: (mtkit_imports(path, package.name) & modules) - {path.stem, "__init__"}
            for path in sorted(package.glob("*.py"))}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of `graph` as [a, b, ..., a], or None (depth-first search, three colours)."""
    state: dict[str, int] = {}  # absent: not seen; 1: on the current path; 2: done, no circle through it
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for child in sorted(graph.get(node, ())):
            if state.get(child) == 1:
                return path[path.index(child):] + [child]
            if child not in state and (found := visit(child)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_the_import_graph_has_no_circle() -> None:
    cycle = find_cycle(import_graph(PACKAGE))
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_a_circle_is_found_wherever_its_import_hides(tmp_path: Path) -> None:
    """The check above fails on a circle, including one closed by an import inside a function or under
    TYPE_CHECKING: a copy of three modules, a -> b -> c, with the edge c -> a written each of those ways."""
    package = tmp_path / "mtkit"
    package.mkdir()
    (package / "a.py").write_text("from mtkit.b import B\n")
    (package / "b.py").write_text("import mtkit.c\n")
    assert find_cycle(import_graph(package)) is None
    for back_edge in ("from mtkit.a import A\n",
                      "def f():\n    from mtkit import a\n",
                      "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from mtkit.a import A\n"):
        (package / "c.py").write_text(back_edge)
        assert find_cycle(import_graph(package)) == ["a", "b", "c", "a"], back_edge


def mtkit_imports(path: Path, package: str = "mtkit") -> set[str]:
    """The package's modules `path` imports anywhere in it; `from mtkit import x` counts as x (and __init__)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == package:
            if "." in node.module:
                names.add(node.module.split(".")[1])
            else:
                names.add("__init__")
                names.update(a.name for a in node.names if (path.parent / f"{a.name}.py").exists())
        elif isinstance(node, ast.Import):
            names.update(a.name.split(".")[1] for a in node.names if a.name.startswith(package + "."))
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


# What `mtkit translate --engine ctranslate2` runs: these modules import no torch (STYLE.md, "What imports torch"),
# except inside the functions that export a stale cache or build the torch engine.
TORCH_FREE = ("errors", "console", "files", "readahead", "tokenizer", "batching", "decoding", "runfiles", "stream",
              "engine", "engines", "ct2cache", "ct2engine", "serve", "serve_config", "engine_config", "serve_request",
              "serve_worker", "options", "process", "preprocess_config", "score", "interop", "forced", "cli", "cli_data", "command",
              "serve_libre", "serve_models", "libretranslate", "api_keys", "markup", "resumable", "xent_filter", "language_id",
              "corpus_filters", "backtranslate", "corpus_plan", "mixing", "subword_sampling")
TORCH_MODULES = {"search", "search_step", "search_sampling", "translate", "model", "layers", "kvcache", "checkpoint",
                 "export", "packed", "precision", "train", "step", "data", "loss", "distributed", "rundir", "recipe",
                 "huggingface", "marian", "train_state", "train_data"}


def top_level_imports(path: Path) -> set[str]:
    """Modules imported when `path` is imported: statements outside functions (TYPE_CHECKING blocks excluded)."""
    names: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for child in ast.walk(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                break
            if isinstance(child, ast.ImportFrom) and child.module:
                names.add(child.module)
            elif isinstance(child, ast.Import):
                names.update(a.name for a in child.names)
    return names


@pytest.mark.parametrize("name", TORCH_FREE)
def test_the_ctranslate2_path_imports_no_torch(name: str) -> None:
    imported = top_level_imports(PACKAGE / f"{name}.py")
    assert not {m for m in imported if m.split(".")[0] == "torch"}, f"{name} imports torch"
    heavy = {m.split(".")[1] for m in imported if m.startswith("mtkit.")} & TORCH_MODULES
    assert not heavy, f"{name} imports torch through mtkit.{sorted(heavy)}"
