"""What the server's tests share: a dozen Multi30k test sources and two blank lines, for each test module; for the
tests of DeepL's SDKs, a real `mtkit serve` process speaking DeepL's API with its keys and state in a folder, and a
memory's pairs as TMX."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import read_gz_lines
from tests.serve.test_app import Server

# A memory's pairs; the first's target no model would write, so an answer taken from the memory is told apart.
PAIRS = [
    ("A man is sleeping.", "Gespeicherte Übersetzung: Ein Mann schläft."),
    ("Two dogs play in the snow.", "Zwei Hunde spielen im Schnee."),
    ("A DOG runs.", "Ein Hund rennt."),
    ("A woman reads a book.", "Eine Frau liest ein Buch."),
    ("The children are laughing.", "Die Kinder lachen."),
]


def tmx(pairs: list[tuple[str, str]]) -> str:
    units = "".join(
        f'<tu><tuv xml:lang="en-US"><seg>{s}</seg></tuv><tuv xml:lang="de-DE"><seg>{t}</seg></tuv></tu>'
        for s, t in pairs
    )
    return f'<?xml version="1.0"?><tmx version="1.4"><header srclang="en-US"/><body>{units}</body></tmx>'


@pytest.fixture(scope="module")
def flickr_lines(multi30k: Path) -> list[str]:
    return read_gz_lines(multi30k / "test_2016_flickr.en.gz", 12) + ["", "   "]


def deepl_server(run: Path, folder: Path, keys: list[str], limits: dict[str, int] | None = None) -> Server:
    """`mtkit serve RUN` on 127.0.0.1 with these --api-keys (and --character-limits), its state in `folder`."""
    (folder / "keys").write_text("".join(f"{key}\n" for key in keys), encoding="utf-8")
    options = ["--api-keys", str(folder / "keys"), "--state", str(folder / "state.sqlite3")]
    if limits:
        (folder / "limits").write_text("".join(f"{k} {n}\n" for k, n in limits.items()), encoding="utf-8")
        options += ["--character-limits", str(folder / "limits")]
    return Server(run, folder / "stderr.log", *options)
