"""What the server's tests share: a dozen Multi30k test sources and two blank lines, for each test module."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import read_gz_lines


@pytest.fixture(scope="module")
def flickr_lines(multi30k: Path) -> list[str]:
    return read_gz_lines(multi30k / "test_2016_flickr.en.gz", 12) + ["", "   "]
