"""Hostile and damaged archives and XML refused with a DocumentError naming the file, before anything is
decompressed where the zip's directory already tells; rezip keeps members, their order and their compression."""

from __future__ import annotations

import io
import struct
import zipfile

import pytest

from mtkit.documents.job import DocumentError
from mtkit.documents.safety import OLE2, Limits, open_zip, parse_xml, read_member, rezip, write_xml

LIMITS = Limits()


def zipped(files: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return out.getvalue()


def set_flag(data: bytes, flag: int) -> bytes:
    """The zip with `flag` set on its (first) member, in its local header and in the central directory."""
    data = bytearray(data)
    for signature, offset in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = data.index(signature) + offset
        data[at : at + 2] = struct.pack("<H", struct.unpack("<H", data[at : at + 2])[0] | flag)
    return bytes(data)


def test_not_a_zip() -> None:
    with pytest.raises(DocumentError, match=r"^report\.docx: not a zip archive"):
        open_zip(b"just some text", "report.docx", LIMITS)


def test_truncated_zip() -> None:
    data = zipped({"word/document.xml": b"<w/>" * 1000})
    with pytest.raises(DocumentError, match=r"^report\.docx: not a zip archive, or a truncated"):
        open_zip(data[: len(data) // 2], "report.docx", LIMITS)


def test_ole2_file_named_docx() -> None:
    with pytest.raises(DocumentError, match=r"^secret\.docx: encrypted or a legacy \.doc/\.ppt"):
        open_zip(OLE2 + bytes(600), "secret.docx", LIMITS)


def test_encrypted_member() -> None:
    data = set_flag(zipped({"word/document.xml": b"<w/>"}), 0x1)
    with pytest.raises(DocumentError, match=r"^report\.docx: word/document\.xml is encrypted"):
        open_zip(data, "report.docx", LIMITS)


def test_odf_encrypted_package() -> None:
    manifest = (
        b'<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0">'
        b'<manifest:file-entry manifest:full-path="content.xml"><manifest:encryption-data/>'
        b"</manifest:file-entry></manifest:manifest>"
    )
    data = zipped({"mimetype": b"application/vnd.oasis.opendocument.text", "META-INF/manifest.xml": manifest})
    with pytest.raises(DocumentError, match=r"^x\.odt: the document is encrypted"):
        open_zip(data, "x.odt", LIMITS)


def test_zip_bomb_refused_before_decompressing(monkeypatch: pytest.MonkeyPatch) -> None:
    data = zipped({"word/document.xml": bytes(50 * 1024 * 1024)})
    assert len(data) < 100_000  # 50 MB of zeros in about 50 KB

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a member was opened")

    monkeypatch.setattr(zipfile.ZipFile, "open", refuse)
    with pytest.raises(DocumentError, match=r"^bomb\.docx: word/document\.xml is compressed \d+ to 1.*zip bomb"):
        open_zip(data, "bomb.docx", LIMITS)


def test_overall_ratio_and_size_limits() -> None:
    data = zipped({f"part{i}.xml": bytes(600_000) for i in range(4)})  # each under ratio_from, all together over
    with pytest.raises(DocumentError, match=r"^many\.docx: compressed \d+ to 1"):
        open_zip(data, "many.docx", LIMITS)
    with pytest.raises(
        DocumentError, match=r"^many\.docx: part0\.xml unzips to 600000 bytes, over the limit of 100000 bytes"
    ):
        open_zip(data, "many.docx", Limits(max_unzipped=100_000, max_ratio=10_000))
    with pytest.raises(DocumentError, match=r"^many\.docx: 4 members in the zip, over the limit of 3"):
        open_zip(data, "many.docx", Limits(max_members=3))


@pytest.mark.parametrize("path", ["../evil.xml", "word/../../evil.xml", "/etc/evil.xml", "C:/evil.xml"])
def test_member_path_outside_the_archive(path: str) -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr(zipfile.ZipInfo(path), b"<x/>")
    assert zipfile.ZipFile(io.BytesIO(out.getvalue())).namelist() == [path]
    with pytest.raises(DocumentError, match=r"^report\.docx: the member path .* points outside the archive"):
        open_zip(out.getvalue(), "report.docx", LIMITS)


def test_damaged_member_is_refused_at_read() -> None:
    data = bytearray(zipped({"content.xml": b"<x>some text to damage</x>"}, zipfile.ZIP_STORED))
    data[data.index(b"damage")] ^= 0x20  # the bytes change, the CRC does not
    archive = open_zip(bytes(data), "x.odt", LIMITS)
    with pytest.raises(DocumentError, match=r"^x\.odt: content\.xml is damaged in the zip"):
        read_member(archive, "content.xml", "x.odt")
    with pytest.raises(DocumentError, match=r"^x\.odt: content\.xml is damaged"):
        rezip(archive, {})


def test_a_member_larger_than_declared_is_never_read_past_its_size() -> None:
    data = bytearray(zipped({"content.xml": b"<x>" + b"a" * 5000 + b"</x>"}, zipfile.ZIP_STORED))
    for signature, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):  # the uncompressed size, said to be 10
        at = data.index(signature) + offset
        data[at : at + 4] = struct.pack("<I", 10)
    archive = open_zip(bytes(data), "x.odt", LIMITS)
    with pytest.raises(DocumentError, match=r"^x\.odt: content\.xml is damaged"):
        read_member(archive, "content.xml", "x.odt")


def test_xml_with_an_external_entity_or_billion_laughs() -> None:
    external = b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><x>&e;</x>'
    laughs = b'<!DOCTYPE x [<!ENTITY a "lol"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]><x>&b;</x>'
    for xml in (external, laughs):
        with pytest.raises(DocumentError, match=r"^x\.docx: word/document\.xml: the XML declares entities"):
            parse_xml(xml, "x.docx: word/document.xml")
    with pytest.raises(DocumentError, match=r"^x\.docx: word/document\.xml: not well-formed XML"):
        parse_xml(b"<x><y></x>", "x.docx: word/document.xml")
    assert parse_xml(b"<!DOCTYPE html><html>a</html>", "x.epub: a.xhtml").tag == "html"  # no entity: fine


def test_write_xml_keeps_the_declaration_and_namespaces() -> None:
    original = b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\r\n<a:x xmlns:a="urn:a"><a:y>t</a:y></a:x>'
    root = parse_xml(original, "x")
    root[0].text = "u"
    assert write_xml(root, original) == original.replace(b">t<", b">u<")


def test_rezip_keeps_order_compression_and_bytes_with_mimetype_first_and_stored() -> None:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        archive.writestr("content.xml", b"<x>old</x>", zipfile.ZIP_DEFLATED)
        archive.writestr("mimetype", b"application/vnd.oasis.opendocument.text", zipfile.ZIP_DEFLATED)
        archive.writestr("Pictures/a.png", b"\x89PNG not really", zipfile.ZIP_STORED)
        archive.writestr("styles.xml", b"<s/>" * 100, zipfile.ZIP_DEFLATED)
    original = open_zip(out.getvalue(), "x.odt", LIMITS)
    done = zipfile.ZipFile(io.BytesIO(rezip(original, {"content.xml": b"<x>new</x>"})))
    assert done.namelist() == ["mimetype", "content.xml", "Pictures/a.png", "styles.xml"]
    assert done.infolist()[0].compress_type == zipfile.ZIP_STORED
    assert done.read(done.infolist()[0]) == b"application/vnd.oasis.opendocument.text"
    assert done.getinfo("Pictures/a.png").compress_type == zipfile.ZIP_STORED
    assert done.getinfo("styles.xml").compress_type == zipfile.ZIP_DEFLATED
    assert done.read("content.xml") == b"<x>new</x>"
    assert done.read("styles.xml") == b"<s/>" * 100
    assert done.read("Pictures/a.png") == b"\x89PNG not really"
