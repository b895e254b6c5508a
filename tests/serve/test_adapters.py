"""mtkit serve's three APIs are adapters side by side over one translation service (docs/architecture.md, serve/):
no module of one adapter imports a module of another, and the modules they share (the service, the request checks,
the forms, the stores) import no adapter. Imports parsed with ast as tests/test_layering.py parses them (inside
functions and under TYPE_CHECKING included)."""

from __future__ import annotations

from pathlib import Path

from tests.test_layering import PACKAGE, import_graph, write_package

# Each API's modules: what reads its requests and shapes its answers.
ADAPTERS = {
    "mtkit": {"serve.mtkit_api"},
    "libretranslate": {"serve.libre_request", "serve.libre_api"},
    "deepl": {
        "serve.deepl_request",
        "serve.deepl_api",
        "serve.deepl_documents",
        "serve.deepl_memories",
        "serve.deepl_glossaries_v3",
    },
}
# What puts the adapters side by side: the app mounts all three, the server runs the app and reads /info's facts.
COMPOSITION = {"serve.app", "serve.server"}


def crossings(graph: dict[str, set[str]]) -> list[str]:
    """`module -> module` for each import from one adapter into another, or from a shared module into an adapter."""
    adapter_of = {module: api for api, modules in ADAPTERS.items() for module in modules}
    found = []
    for module, imported in sorted(graph.items()):
        if not module.startswith("serve.") or module in COMPOSITION:
            continue
        for target in sorted(imported):
            if target in adapter_of and adapter_of.get(module) != adapter_of[target]:
                found.append(f"{module} -> {target}")
    return found


def test_no_adapter_imports_another_and_no_shared_module_imports_an_adapter() -> None:
    assert crossings(import_graph(PACKAGE)) == []


def test_every_module_named_for_an_api_is_one_of_its_adapters() -> None:
    """A new module named mtkit_*, libre_* or deepl_* joins its API's list above, and so its check."""
    named = {f"serve.{path.stem}" for path in (PACKAGE / "serve").glob("*.py")}
    named = {m for m in named if m.split(".")[1].startswith(("mtkit_", "libre_", "deepl_"))}
    assert named == set().union(*ADAPTERS.values())


def test_a_crossing_is_found_wherever_its_import_hides(tmp_path: Path) -> None:
    files = {"serve/__init__.py": "", "serve/service.py": "", "serve/libre_api.py": "", "serve/mtkit_api.py": ""}
    files |= {"serve/deepl_request.py": "", "serve/deepl_api.py": "from mtkit.serve.deepl_request import x\n"}
    package = write_package(tmp_path, files)
    assert crossings(import_graph(package)) == []
    for path, text, crossing in [
        (
            "serve/deepl_api.py",
            "def f():\n    from mtkit.serve import libre_api\n",
            "serve.deepl_api -> serve.libre_api",
        ),
        ("serve/libre_api.py", "import mtkit.serve.mtkit_api\n", "serve.libre_api -> serve.mtkit_api"),
        ("serve/service.py", "from mtkit.serve.deepl_request import x\n", "serve.service -> serve.deepl_request"),
    ]:
        (package / path).write_text(text)
        assert crossings(import_graph(package)) == [crossing], text
        (package / path).write_text("")
