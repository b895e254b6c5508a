"""LibreTranslate's document endpoints on a real `mtkit serve` process, asked by a plain multipart client
(requests): a document comes back translated byte for byte as `mtkit translate-file` writes it; hostile and
mislabelled files are each a 4xx with a one-line reason naming the file, and the server goes on serving; download
names are unguessable, unknown ones 404; no answer shows a server path."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest
import requests

from tests.conftest import run_mtkit_in_process
from tests.serve.test_app import Server

docx = pytest.importorskip("docx")
TEXT = "A man is sleeping. Two dogs play in the snow.\n\nA woman reads a book.\n"


def zipped(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out.getvalue()


def word_document() -> bytes:
    document = docx.Document()
    document.add_paragraph("A man in a red shirt is ")
    document.paragraphs[0].add_run("climbing").bold = True
    document.paragraphs[0].add_run(" a rock.")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


HOSTILE = {  # file name, content: what each must be refused for (in the error)
    "bomb.docx": (zipped({"[Content_Types].xml": b"<x/>", "word/document.xml": bytes(30 << 20)}), "zip bomb"),
    "entities.docx": (
        zipped(
            {
                "[Content_Types].xml": b"<Types/>",
                "word/document.xml": b'<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><x>&e;</x>',
            }
        ),
        "entit",
    ),
    "legacy.docx": (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(600), "encrypted or a legacy"),
    "text.docx": (b"just some text", "zip"),
    "report.pdf": (b"%PDF-1.4", "not a format"),
    "broken.odt": (b"PK\x03\x04" + bytes(40), "zip"),
}


@pytest.fixture(scope="module")
def server(tiny_run: Path, tmp_path_factory: pytest.TempPathFactory):
    log = tmp_path_factory.mktemp("files-server") / "stderr.log"
    started = Server(tiny_run, log, "--max-file-bytes", "200000")
    yield started
    started.stop()


# A gettext catalog and an XLIFF file with strings to fill: the document routes take them as translate-file does.
CATALOG = (
    b'msgid ""\nmsgstr ""\n"Content-Type: text/plain; charset=UTF-8\\n"\n"Language: de\\n"\n\n'
    b'#, c-format\nmsgid "A man in a red shirt is climbing %s."\nmsgstr ""\n\n'
    b'msgid "Two dogs play."\nmsgstr "Zwei Hunde."\n'
)
XLIFF = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<xliff xmlns="urn:oasis:names:tc:xliff:document:1.2" version="1.2">'
    b'<file source-language="en" target-language="de" datatype="plaintext" original="ui"><body>'
    b'<trans-unit id="1"><source>A dog runs in the <g id="1">park</g>.</source></trans-unit>'
    b"</body></file></xliff>\n"
)


def upload(server: Server, name: str, data: bytes, **fields: str) -> requests.Response:
    form = {"source": "en", "target": "de"} | fields
    return requests.post(f"http://127.0.0.1:{server.port}/translate_file", files={"file": (name, data)}, data=form)


def test_a_document_comes_back_as_translate_file_writes_it(server: Server, tiny_run: Path, tmp_path: Path) -> None:
    for name, data in (
        ("notes.txt", TEXT.encode()),
        ("app.po", CATALOG),
        ("ui.xlf", XLIFF),
        ("report.docx", word_document()),
    ):
        answer = upload(server, name, data)
        assert answer.status_code == 200, answer.text
        url = answer.json()["translatedFileUrl"]
        token = url.rsplit("/", 1)[1].split(".", 1)[0]
        assert url.startswith(f"http://127.0.0.1:{server.port}/download_file/") and len(token) >= 32
        fetched = requests.get(url)
        stem, suffix = name.rsplit(".", 1)
        assert fetched.status_code == 200 and f'filename="{stem}.de.{suffix}"' in fetched.headers["content-disposition"]
        (tmp_path / name).write_bytes(data)
        cli = run_mtkit_in_process("translate-file", tiny_run, tmp_path / name)
        assert cli.returncode == 0, cli.stderr
        assert fetched.content == (tmp_path / f"{stem}.de.{suffix}").read_bytes()
        assert requests.get(url).status_code == 200  # fetched again until it expires
    assert docx.Document(io.BytesIO(fetched.content)).paragraphs[0].text != "A man in a red shirt is climbing a rock."
    missing = requests.get(f"http://127.0.0.1:{server.port}/download_file/{'x' * 32}.notes.de.txt")
    assert missing.status_code == 404 and "error" in missing.json()


def test_hostile_and_mislabelled_files_are_refused_and_the_server_goes_on(server: Server) -> None:
    for name, (data, reason) in HOSTILE.items():
        answer = upload(server, name, data)
        assert answer.status_code == 400, (name, answer.text)
        error = answer.json()["error"]
        assert error.startswith(name) and reason in error and "\n" not in error and "/tmp" not in error
    too_big = upload(server, "big.txt", b"A dog runs. " * 20000)
    assert too_big.status_code == 413  # exact bytes, and the option that lets it through (not --max-bytes)
    assert too_big.json()["error"] == "big.txt: 240000 bytes, over the limit of 200000 bytes (--max-file-bytes)"
    far_too_big = upload(server, "big.txt", b"A dog runs. " * 30000)  # refused before the body is all read
    assert far_too_big.status_code == 413 and "(--max-file-bytes 200000 and 65536" in far_too_big.json()["error"]
    assert upload(server, "notes.txt", TEXT.encode(), source="auto").status_code == 400
    no_file = requests.post(f"http://127.0.0.1:{server.port}/translate_file", data={"source": "en", "target": "de"})
    assert no_file.status_code == 400 and "file" in no_file.json()["error"]
    assert server.translate({"text": ["A man is sleeping."]})[0] == 200  # still serving
    settings = requests.get(f"http://127.0.0.1:{server.port}/frontend/settings").json()
    assert settings["filesTranslation"] is True
    assert {".docx", ".srt", ".epub", ".po", ".pot", ".xlf", ".xliff", ".xlsx"} <= set(settings["supportedFilesFormat"])
