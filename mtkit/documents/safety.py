"""Untrusted zip archives and XML opened safely: every limit checked on the central directory before a byte is
decompressed, reads capped whatever a header declares, XML parsed without entities, DTDs or the network, and a
translated archive written back member by member. Knows no format beyond the signs of an encrypted package."""

from __future__ import annotations

import io
import re
import zipfile
import zlib
from dataclasses import dataclass

from lxml import etree

from mtkit.documents.job import DocumentError

OLE2 = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # an encrypted OOXML package, or a legacy .doc/.ppt/.xls
_CHUNK = 1 << 16
_DECLARATION = re.compile(rb"^(?:\xef\xbb\xbf)?<\?xml[^>]*\?>\s*")
_ENCRYPTION = "{urn:oasis:names:tc:opendocument:xmlns:manifest:1.0}encryption-data"


@dataclass(frozen=True)
class Limits:
    """What an upload may be: its size (`max_bytes`, which --max-file-bytes sets for the CLI and the server alike),
    and what its zip may unpack to (a zip bomb is refused from its directory). A member under `ratio_from` bytes may
    compress better than `max_ratio` (small XML often does); a bomb is big."""

    max_bytes: int = 20 * 1024 * 1024
    max_members: int = 5000
    max_unzipped: int = 200 * 1024 * 1024
    max_ratio: int = 100
    ratio_from: int = 1024 * 1024


def over_limit(size: int, limit: int) -> str:
    """A size over its limit in exact bytes: rounded to MB, 20.0 MB would be "over" 20.0 MB."""
    return f"{size} bytes, over the limit of {limit} bytes"


def open_zip(data: bytes, name: str, limits: Limits) -> zipfile.ZipFile:
    """The archive, once its directory passes every check (nothing decompressed yet but an ODF manifest, capped)."""
    if data.startswith(OLE2):
        raise DocumentError(
            f"{name}: encrypted or a legacy .doc/.ppt (an OLE2 file, not a zip): save it unprotected as .docx/.pptx"
        )
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError) as error:
        raise DocumentError(f"{name}: not a zip archive, or a truncated or corrupt one ({error})") from None
    archive.filename = name  # what rezip names when a member turns out damaged; zipfile only shows it in repr
    members = archive.infolist()
    if len(members) > limits.max_members:
        raise DocumentError(f"{name}: {len(members)} members in the zip, over the limit of {limits.max_members}")
    if len({member.filename for member in members}) < len(members):
        raise DocumentError(f"{name}: the zip holds the same member name twice")
    for member in members:
        _check_member(member, name, limits)
    unzipped = sum(member.file_size for member in members)
    packed = sum(member.compress_size for member in members)
    if unzipped > limits.max_unzipped:
        raise DocumentError(f"{name}: unzips to {over_limit(unzipped, limits.max_unzipped)}")
    if unzipped >= limits.ratio_from and unzipped > limits.max_ratio * max(packed, 1):
        raise DocumentError(
            f"{name}: compressed {unzipped // max(packed, 1)} to 1, over {limits.max_ratio}: a zip bomb?"
        )
    if "META-INF/manifest.xml" in archive.namelist():
        manifest = parse_xml(read_member(archive, "META-INF/manifest.xml", name), f"{name}: META-INF/manifest.xml")
        if manifest.find(f".//{_ENCRYPTION}") is not None:
            raise DocumentError(f"{name}: the document is encrypted (password protected): save it without a password")
    return archive


def _check_member(member: zipfile.ZipInfo, name: str, limits: Limits) -> None:
    path = member.filename
    if member.flag_bits & 0x1:
        raise DocumentError(f"{name}: {path} is encrypted in the zip: save the document without a password")
    parts = re.split(r"[/\\]", path)
    if path.startswith(("/", "\\")) or ".." in parts or re.match(r"^[A-Za-z]:", path):
        raise DocumentError(f"{name}: the member path {path!r} points outside the archive")
    if member.file_size > limits.max_unzipped:
        raise DocumentError(f"{name}: {path} unzips to {over_limit(member.file_size, limits.max_unzipped)}")
    ratio = member.file_size / max(member.compress_size, 1)
    if member.file_size >= limits.ratio_from and ratio > limits.max_ratio:
        raise DocumentError(f"{name}: {path} is compressed {ratio:.0f} to 1, over {limits.max_ratio}: a zip bomb?")


def read_member(archive: zipfile.ZipFile, member: str, name: str) -> bytes:
    """A member's bytes, read in chunks and never past its declared size (open_zip checked that size); a damaged
    member (bad CRC, broken stream) is a DocumentError naming it."""
    try:
        info = archive.getinfo(member)
        chunks, total = [], 0
        with archive.open(info) as stream:
            while chunk := stream.read(_CHUNK):
                total += len(chunk)
                if total > info.file_size:
                    raise DocumentError(f"{name}: {member} unzips to more than its declared {info.file_size} bytes")
                chunks.append(chunk)
        return b"".join(chunks)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError) as error:
        raise DocumentError(f"{name}: {member} is damaged in the zip ({error})") from None
    except KeyError:
        raise DocumentError(f"{name}: {member} is missing from the zip") from None


def parse_xml(data: bytes, where: str) -> etree._Element:
    """The XML's root, parsed without resolving entities, loading a DTD or the network; a DOCTYPE that declares an
    entity (external entities, billion laughs) is refused, as is XML that is not well-formed. `where` names the
    file and member ("book.docx: word/document.xml")."""
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as error:
        raise DocumentError(f"{where}: not well-formed XML ({error})") from None
    dtd = root.getroottree().docinfo.internalDTD
    if dtd is not None and (any(True for _ in dtd.iterentities()) or b"<!ENTITY" in data):
        raise DocumentError(
            f"{where}: the XML declares entities in its DOCTYPE, which mtkit refuses (external or expanding entities)"
        )
    return root


def write_xml(root: etree._Element, original: bytes) -> bytes:
    """The changed tree as bytes, with the original XML declaration as written (lxml keeps the namespaces)."""
    tree = root.getroottree()
    if (tree.docinfo.encoding or "UTF-8").upper() not in ("UTF-8", "UTF8"):
        return etree.tostring(tree, encoding=tree.docinfo.encoding, xml_declaration=True)
    head = _DECLARATION.match(original)
    return (head.group(0) if head else b"") + etree.tostring(tree, encoding="UTF-8")


def rezip(original: zipfile.ZipFile, replaced: dict[str, bytes]) -> bytes:
    """A new zip: every member in the original order with its compression, an unreplaced one's bytes as they were,
    and `mimetype` first and stored (ODF and EPUB readers find the type at a fixed offset)."""
    members = original.infolist()
    members.sort(key=lambda member: member.filename != "mimetype")  # stable: the others keep their order
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for member in members:
            data = replaced.get(member.filename)
            if data is None:
                data = read_member(original, member.filename, original.filename or "the document")
            info = zipfile.ZipInfo(member.filename, member.date_time)
            info.compress_type = zipfile.ZIP_STORED if member.filename == "mimetype" else member.compress_type
            info.external_attr, info.create_system, info.comment = (
                member.external_attr,
                member.create_system,
                member.comment,
            )
            archive.writestr(info, data)
        archive.comment = original.comment
    return out.getvalue()
