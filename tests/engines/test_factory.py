"""mtkit.engines.factory: docs/translating.md's Python entry point runs as printed, on either engine, and both
engines give the same line for it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

SNIPPET = re.compile(r"## From Python\n.*?```python\n(.*?)```", re.S)


def documented_snippet() -> str:
    found = SNIPPET.search((ROOT / "docs" / "translating.md").read_text(encoding="utf-8"))
    assert found, "docs/translating.md has no python block under 'From Python'"
    return found.group(1)


@pytest.mark.parametrize("engine", ["torch", "ctranslate2"])
def test_the_documented_entry_point_translates(run: Path, engine: str) -> None:
    """The block as printed, with the reader's run directory replaced by a test run and the engine chosen; its last
    line's value is what the reader sees: one German line for one English one."""
    if engine == "ctranslate2":
        pytest.importorskip("ctranslate2")
    code = documented_snippet()
    assert '"runs/m30k"' in code and 'engine="torch"' in code
    *body, last = code.replace('"runs/m30k"', repr(str(run))).replace('"torch"', repr(engine)).strip().splitlines()
    scope: dict = {}
    exec("\n".join(body), scope)  # the document's own code, run as a reader would
    lines = eval(last.split("#")[0], scope)
    assert isinstance(lines, list) and len(lines) == 1 and lines[0].strip()


def test_both_engines_give_the_documented_call_the_same_line(run: Path) -> None:
    pytest.importorskip("ctranslate2")
    from mtkit.engines.config import EngineConfig
    from mtkit.engines.factory import load_translator
    from mtkit.search.config import SearchOverrides

    outputs = {
        engine: load_translator(run, EngineConfig(engine=engine, device="cpu"), SearchOverrides(beam=4)).translate(
            ["A man is sleeping."]
        )
        for engine in ("torch", "ctranslate2")
    }
    assert outputs["torch"] == outputs["ctranslate2"]
