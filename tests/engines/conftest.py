"""What the CTranslate2 engine's tests share: a copy of the tiny run (its export cache kept out of the session
fixture) and Multi30k test lines with prefixes, made once per test module."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import read_gz_lines

N_LINES = 100  # Multi30k test sentences per setting (both engines: about a second)


@pytest.fixture(scope="module")
def run(tiny_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the tiny run, so that its export cache (RUN_DIR/ctranslate2) stays out of the shared fixture."""
    copy = tmp_path_factory.mktemp("ct2-run") / "run"
    shutil.copytree(tiny_run, copy)
    return copy


@pytest.fixture(scope="module")
def lines(multi30k: Path) -> list[str]:
    return read_gz_lines(multi30k / "test_2016_flickr.en.gz", N_LINES)


@pytest.fixture(scope="module")
def prefixes(multi30k: Path) -> list[str]:
    """0-3 words of each reference: every fourth line has none."""
    refs = read_gz_lines(multi30k / "test_2016_flickr.de.gz", N_LINES)
    return [" ".join(ref.split()[: i % 4]) for i, ref in enumerate(refs)]
