"""The import rules of docs/architecture.md, checked by parsing every module's imports with ast (imports inside
functions and under TYPE_CHECKING included): each role subpackage imports only the packages below it, neither the
modules nor the packages form a circle, few modules stay directly in mtkit/, and the CTranslate2 path imports no
torch."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "mtkit"
BASICS = {"errors", "console", "files", "readahead", "faults", "file_names"}
SHARED = BASICS | {"tokenizer", "score", "language_id"}
# What each part of mtkit may import, from the bottom up: a subpackage (model/, search/, ...) or a module left
# directly in mtkit/. A part may always import its own modules.
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "console": set(),
    "readahead": set(),
    "file_names": set(),  # constants only: the names of the files a data directory, a run and an export hold
    "files": {"errors"},
    "faults": {"errors"},
    "tokenizer": BASICS,
    "score": BASICS,
    "language_id": BASICS,
    # errors only, the stdlib-only floor: a bad ModelConfig or TranslateConfig value is a UserError like any other.
    "model": {"errors"},
    "search": {"errors"},
    # Texts as sentences, the guard, the sentence-by-sentence plan: plain Python below every engine.
    "text": {"errors"},
    # Documents (docx, srt, ...) as sentences out and the file back: formats know mtkit.text, never a model.
    "documents": BASICS | {"text"},
    # Translation memories: TMX and the other files read as streams, the index; PO through documents' reader, MO
    # and the fuzzy-repair piece through corpus's (corpus/ stands below, and hands matching up to the CLI).
    "memory": BASICS | {"text", "documents", "corpus"},
    "corpus": SHARED,
    # runs.model rebuilds a checkpoint's model; runs.checkpoint never imports the model.
    "runs": SHARED | {"model"},
    "training": SHARED | {"model", "search", "corpus", "runs"},
    # A checkpoint read once for every export format, its directory checked; the CTranslate2 and Hugging Face exports,
    # the Marian import. Below engines/: the CTranslate2 engine exports a run on first use. Never training: an
    # imported run's [train] section is given to the import as data.
    "exports": SHARED | {"model", "search", "corpus", "runs"},
    "engines": SHARED | {"model", "search", "corpus", "runs", "text", "exports"},
    "bulk": SHARED | {"search", "corpus", "runs", "engines", "text", "documents"},
    "serve": SHARED | {"search", "corpus", "engines", "text", "documents", "memory", "__init__"},
    "recipe": SHARED | {"model", "search", "corpus", "training"},
    "cli": {"*"},
    "__main__": {"cli"},
    "__init__": set(),
}
MAX_TOP_LEVEL_MODULES = 12


def modules(package: Path) -> dict[str, Path]:
    """Dotted name inside the package (`engines.ct2`, `errors`, `__init__`) -> its file."""
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts)] = path
    return found


def mtkit_imports(path: Path, known: set[str], package: str = "mtkit") -> set[str]:
    """The package's modules `path` imports anywhere in it, as dotted names; `from mtkit.x import y` counts as x.y
    when y is a module, else as x; `from mtkit import __version__` as __init__."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == package:
            base = node.module.split(".")[1:]
            submodules = {".".join([*base, a.name]) for a in node.names} & known
            names.update(submodules or {".".join(base) or "__init__"})
        elif isinstance(node, ast.Import):
            names.update(a.name.split(".", 1)[1] for a in node.names if a.name.startswith(package + "."))
    return names


def import_graph(package: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports. Every edge counts: a lazy import is still a dependency."""
    found = modules(package)
    return {name: mtkit_imports(path, set(found), package.name) - {name} for name, path in found.items()}


def part(module: str) -> str:
    """The subpackage a module belongs to, or the module itself when it lies directly in mtkit/."""
    return module.split(".")[0]


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph seen from above: part -> the other parts its modules import."""
    parts: dict[str, set[str]] = {}
    for module, imported in graph.items():
        parts.setdefault(part(module), set()).update(part(m) for m in imported if part(m) != part(module))
    return parts


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of `graph` as [a, b, ..., a], or None (depth-first search, three colours)."""
    state: dict[str, int] = {}  # absent: not seen; 1: on the current path; 2: done, no circle through it
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for child in sorted(graph.get(node, ())):
            if state.get(child) == 1:
                return path[path.index(child) :] + [child]
            if child not in state and (found := visit(child)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


GRAPH = import_graph(PACKAGE)


def test_no_circle_among_modules() -> None:
    cycle = find_cycle(GRAPH)
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_no_circle_among_packages() -> None:
    cycle = find_cycle(package_graph(GRAPH))
    assert cycle is None, "package circle: " + " -> ".join(cycle or [])


# The longest chain of imports between top-level parts, in parts (`__main__ -> cli -> serve -> engines -> exports ->
# runs -> model -> errors` is 8): each level more is one more floor a reader climbs to follow a call.
MAX_LEVELS = 8


def longest_chain(graph: dict[str, set[str]]) -> list[str]:
    """The longest path of an acyclic graph, as the nodes it passes, from its top down."""
    chains: dict[str, list[str]] = {}

    def chain(node: str) -> list[str]:
        if node not in chains:
            below = [chain(child) for child in sorted(graph.get(node, ()))]
            chains[node] = [node, *max(below, key=len, default=[])]
        return chains[node]

    return max((chain(node) for node in sorted(graph)), key=len)


def test_longest_chain_is_measured() -> None:
    assert longest_chain({"a": {"b", "c"}, "b": {"c"}, "c": set(), "d": {"c"}}) == ["a", "b", "c"]


def test_the_parts_stand_at_most_max_levels_high() -> None:
    chain = longest_chain(package_graph(GRAPH))
    assert len(chain) <= MAX_LEVELS, f"{len(chain)} levels: " + " -> ".join(chain)


def write_package(root: Path, files: dict[str, str]) -> Path:
    package = root / "mtkit"
    for name, text in files.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return package


def test_a_module_circle_is_found_wherever_its_import_hides(tmp_path: Path) -> None:
    """The check fails on a circle, including one closed by an import inside a function or under TYPE_CHECKING."""
    package = write_package(tmp_path, {"a.py": "from mtkit.b import B\n", "b.py": "import mtkit.c\n", "c.py": ""})
    assert find_cycle(import_graph(package)) is None
    for back_edge in (
        "from mtkit.a import A\n",
        "def f():\n    from mtkit import a\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from mtkit.a import A\n",
    ):
        (package / "c.py").write_text(back_edge)
        assert find_cycle(import_graph(package)) == ["a", "b", "c", "a"], back_edge


def test_a_package_circle_is_found_where_no_module_circle_is(tmp_path: Path) -> None:
    """corpus.x -> engines.y and engines.z -> corpus.w: no module is on a circle, the two packages are."""
    files = {"corpus/__init__.py": "", "engines/__init__.py": "", "corpus/w.py": "", "engines/y.py": ""}
    files |= {"corpus/x.py": "from mtkit.engines.y import Y\n", "engines/z.py": "from mtkit.corpus import w\n"}
    graph = import_graph(write_package(tmp_path, files))
    assert find_cycle(graph) is None
    assert find_cycle(package_graph(graph)) == ["corpus", "engines", "corpus"]


def test_every_part_has_its_rule() -> None:
    parts = {part(module) for module in modules(PACKAGE)}
    assert parts == set(ALLOWED), "give a new package or top-level module its rule in tests/test_layering.py"


@pytest.mark.parametrize("module", sorted(modules(PACKAGE)))
def test_imports_point_down(module: str) -> None:
    allowed = ALLOWED[part(module)]
    if "*" in allowed:
        return
    imported = {part(m) for m in GRAPH[module]} - {part(module)}
    assert not imported - allowed, f"{module} must not import {sorted(imported - allowed)}"


def test_few_modules_stay_at_the_top() -> None:
    top = sorted(path.stem for path in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP_LEVEL_MODULES, top


def test_every_package_init_is_empty() -> None:
    """An import of mtkit.engines.ct2 runs mtkit/engines/__init__.py: empty, it pulls in nothing (torch least)."""
    for init in PACKAGE.glob("*/__init__.py"):
        assert init.read_text(encoding="utf-8") == "", init


def test_nothing_imports_cli_or_recipes(tmp_path: Path) -> None:
    """As torchtune's test_import_recipes: the installed package cannot import the recipes folder."""
    for module, imported in GRAPH.items():
        if part(module) not in ("cli", "__main__"):
            assert "cli" not in {part(m) for m in imported}, module
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        names += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        assert not any(m and m.split(".")[0] == "recipes" for m in names), path
    run = subprocess.run([sys.executable, "-c", "import recipes"], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode != 0 and "ModuleNotFoundError" in run.stderr


# What `mtkit translate --engine ctranslate2` and `mtkit serve --engine ctranslate2` run: these modules import no torch
# (docs/architecture.md, "What imports torch"), except inside the functions that export a stale cache or build the
# torch engine.
TORCH_FREE = (
    "errors", "console", "files", "readahead", "faults", "file_names", "tokenizer", "score", "language_id",
    "search.config",
    "corpus.batching", "corpus.config", "corpus.plan", "corpus.sharding", "corpus.filters", "corpus.mixing",
    "corpus.subword_sampling", "corpus.modifiers", "corpus.term_hints", "corpus.shortlist", "corpus.shortlist_record",
    "corpus.language_pairs",
    "runs.checkpoint_files",
    "exports.directory", "exports.ctranslate2_library",
    "engines.contract", "engines.factory", "engines.config", "engines.ct2", "engines.ct2_cache", "engines.ct2_setup",
    "engines.streaming", "engines.output", "engines.plans",
    "text.sentences", "text.guard", "text.sentence_plan", "text.line_plan", "text.casing", "text.markup",
    "text.html_tree",
    "documents.job", "documents.formats", "documents.safety", "documents.format_runs", "documents.office",
    "documents.epub", "documents.plain", "documents.markdown", "documents.subtitles", "bulk.document_translation",
    "bulk.synthetic", "bulk.forced", "bulk.xent_filter", "bulk.resumable", "bulk.shards", "bulk.shard_sets",
    "bulk.file_translation", "bulk.distill_clean",
    "serve.app", "serve.server", "serve.config", "serve.request", "serve.forms", "serve.worker", "serve.router",
    "serve.service", "serve.mtkit_api", "serve.libre_api", "serve.libre_request", "serve.api_keys", "serve.http_body",
    "serve.state", "serve.deepl_request", "serve.deepl_api", "serve.deepl_documents", "serve.deepl_memories",
    "serve.deepl_glossaries_v3", "serve.metrics",
    "serve.readiness", "serve.redis_state", "serve.memory_state",
    "memory.matching", "memory.tmx", "memory.readers",
    "cli.main", "cli.preprocess_command", "cli.train_command", "cli.average_command", "cli.translate_command",
    "cli.score_command", "cli.score_pairs_command", "cli.filter_pairs_command", "cli.synthetic_commands",
    "cli.clean_distilled_command", "cli.merge_shards_command", "cli.translate_file_command", "cli.shortlist_command",
    "cli.export_command", "cli.import_command", "cli.serve_command", "cli.memory_command", "cli.command",
    "cli.options", "cli.process",
    "training.config",
)  # fmt: skip
TORCH_PARTS = {"model", "training", "recipe"}
# The torch-free modules of a torch part: TrainConfig, whose fields' help the CLI reads.
TORCH_FREE_IN_TORCH_PARTS = {"training.config"}
TORCH_MODULES = {"search.beam", "search.step", "search.sampling", "engines.torch_engine", "exports.ctranslate2",
                 "exports.source", "exports.huggingface", "exports.marian", "runs.model",
                 "corpus.binarized", "runs.checkpoint", "runs.directory"}  # fmt: skip


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
                names.update(f"{child.module}.{a.name}" for a in child.names)
            elif isinstance(child, ast.Import):
                names.update(a.name for a in child.names)
    return names


@pytest.mark.parametrize("name", TORCH_FREE)
def test_the_ctranslate2_path_imports_no_torch(name: str) -> None:
    imported = top_level_imports(modules(PACKAGE)[name])
    assert not {m for m in imported if m.split(".")[0] == "torch"}, f"{name} imports torch"
    inside = {m.split(".", 1)[1] for m in imported if m.startswith("mtkit.")}
    free = {m for m in inside if any(m == f or m.startswith(f + ".") for f in TORCH_FREE_IN_TORCH_PARTS)}
    heavy = {m for m in inside - free if m in TORCH_MODULES or part(m) in TORCH_PARTS}
    assert not heavy, f"{name} imports torch through mtkit.{sorted(heavy)}"


def test_the_torch_free_list_covers_what_it_claims() -> None:
    """Every module named above exists, and none is also named as one that imports torch."""
    known = set(modules(PACKAGE))
    assert set(TORCH_FREE) <= known and TORCH_MODULES <= known
    assert not set(TORCH_FREE) & TORCH_MODULES
    assert {m for m in TORCH_FREE if part(m) in TORCH_PARTS} == TORCH_FREE_IN_TORCH_PARTS


def test_importing_the_ctranslate2_path_loads_no_torch() -> None:
    """The check above, in a real interpreter: every torch-free module imported, and torch never loaded."""
    code = "import importlib, sys\n" + "".join(f"importlib.import_module('mtkit.{name}')\n" for name in TORCH_FREE)
    code += "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if m.startswith('mtkit'))\n"
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
