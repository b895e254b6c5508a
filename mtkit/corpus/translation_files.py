"""Translation files as a parallel corpus: TMX, gettext PO and MO, XLIFF 1.2 and 2.x, each read into the (source,
target) pairs preprocess cleans like any corpus's lines. Only translated entries count (untranslated, fuzzy,
obsolete and header entries never); an entry of several lines gives one pair per line where both sides have as
many, and is skipped otherwise. Reads only. Its own small readers, not mtkit.memory's: corpus/ stands below memory/
and may not import it (docs/architecture.md); the XML they parse is read safely one way (xml_events, text_of), which
mtkit.memory's TMX and XLIFF readers use too.
"""

from __future__ import annotations

import glob
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from lxml import etree

from mtkit.errors import UserError, check

ENDS = (".tmx", ".po", ".mo", ".xlf", ".xliff")
# Inline codes whose content is the document's markup, not its text (TMX 1.4b and XLIFF 1.2 alike).
CODES = {"bpt", "ept", "it", "ph", "ut"}
# A language code with an optional region or modifier (de, de_DE, pt-BR, sr@latin); some catalogs write a name
# ("German") in their Language field, which says nothing checkable and is let through.
LANGUAGE_CODE = re.compile(r"^([A-Za-z]{2,3})(?:[_@-].*)?$")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v", '"': '"', "\\": "\\"}


@dataclass
class PairCounts:
    """What reading the files gave: pairs kept, and entries skipped as multi-line with unequal line counts."""

    pairs: int = 0
    uneven_lines: int = 0


def is_translation_files(prefix: str) -> bool:
    """True when PREFIX names a translation file, or a directory or glob that holds one (a line-file prefix never
    ends so, nor do the `PREFIX.en` files a glob or directory of line files holds)."""
    if prefix.lower().endswith(ENDS):
        return True
    if Path(prefix).is_dir():
        return any(path.name.lower().endswith(ENDS) for path in Path(prefix).iterdir())
    return glob.has_magic(prefix) and any(match.lower().endswith(ENDS) for match in glob.glob(prefix))


def translation_files(prefix: str) -> list[Path]:
    """The translation files PREFIX names, in sorted order: itself, a directory's or a glob's matches."""
    if Path(prefix).is_dir():
        found = sorted(path for path in Path(prefix).iterdir() if path.name.lower().endswith(ENDS))
    elif glob.has_magic(prefix):
        found = sorted(Path(match) for match in glob.glob(prefix) if match.lower().endswith(ENDS))
    else:
        check(Path(prefix).is_file(), f"{prefix}: no such file")
        found = [Path(prefix)]
    check(found, f"{prefix}: holds no .tmx, .po, .mo, .xlf or .xliff file")
    return found


def read_pairs(
    paths: list[Path], langs: tuple[str, str], counts: PairCounts | None = None
) -> Iterator[tuple[str, str]]:
    """Every file's pairs one after the other, each entry split into its lines (split_lines); `counts` is updated."""
    counts = counts if counts is not None else PairCounts()
    for path in paths:
        for source, target in file_entries(path, langs):
            lines = split_lines(source, target)
            if lines is None:  # a help text the translator wrapped otherwise: one pair of its lines joined
                counts.uneven_lines += 1
                lines = [(" ".join(_lines(source)).strip(), " ".join(_lines(target)).strip())]
            counts.pairs += len(lines)
            yield from lines


def split_lines(source: str, target: str) -> list[tuple[str, str]] | None:
    """An entry as one pair per line (None: the sides have different line counts); lines empty on both sides go
    (a help text's blank lines, its final newline)."""
    src_lines, tgt_lines = _lines(source), _lines(target)
    if len(src_lines) != len(tgt_lines):
        return None
    return [(src, tgt) for src, tgt in zip(src_lines, tgt_lines) if src.strip() or tgt.strip()]


def _lines(text: str) -> list[str]:
    # Other line breaks inside a line (\r, \u2028, form feeds) become spaces: a corpus line holds none.
    return [" ".join(line.splitlines()) for line in text.replace("\r\n", "\n").split("\n")]


def file_entries(path: Path, langs: tuple[str, str]) -> Iterator[tuple[str, str]]:
    """One file's translated entries as (source, target), by its ending."""
    end = path.suffix.lower()
    if end in (".po", ".mo"):
        yield from gettext_entries(path, langs[1])
    else:
        yield from _xml_entries(path, langs, tmx=end == ".tmx")


def base_language(code: str) -> str:
    """de_AT, de-DE, de.UTF-8, de -> de: a language whatever its region, script or encoding."""
    return code.strip().replace("-", "_").split("_")[0].split(".")[0].split("@")[0].lower()


def check_language(path: Path, named: str, expected: str) -> None:
    """A file whose header names another language than the corpus's is refused; a name that is not a code passes."""
    match = LANGUAGE_CODE.match(named.strip())
    if match and base_language(named) != base_language(expected):
        raise UserError(f"{path}: its header names the language {named.strip()!r}, but the corpus's is {expected!r}")


def gettext_entries(path: Path, target_lang: str) -> Iterator[tuple[str, str]]:
    """A PO or MO catalog's translated entries: msgid -> msgstr, a plural's msgid -> msgstr[0] and msgid_plural ->
    msgstr[1] where there are two forms or more; msgctxt only tells entries apart and is left out."""
    data = path.read_bytes()
    entries = mo_entries(data, str(path)) if path.suffix.lower() == ".mo" else po_entries(data, str(path))
    for entry in entries:
        if entry.msgid == "" and not entry.msgid_plural:
            check_language(path, header_field(entry.msgstr[0] if entry.msgstr else "", "Language"), target_lang)
            continue
        if "fuzzy" in entry.flags or entry.obsolete:
            continue
        if entry.msgstr and entry.msgstr[0]:
            yield entry.msgid, entry.msgstr[0]
        if entry.msgid_plural and len(entry.msgstr) > 1 and entry.msgstr[1]:
            yield entry.msgid_plural, entry.msgstr[1]


@dataclass
class CatalogEntry:
    """One gettext entry as both formats hold it; msgstr is the list of forms (one without a plural)."""

    msgid: str
    msgid_plural: str = ""
    msgstr: tuple[str, ...] = ()
    flags: frozenset[str] = frozenset()
    obsolete: bool = False


def header_field(header: str, name: str) -> str:
    """A catalog header's field (`Language: de` -> de), "" when absent."""
    for line in header.splitlines():
        key, _, value = line.partition(":")
        if key.strip().lower() == name.lower():
            return value.strip()
    return ""


def _charset(data: bytes) -> str:
    """The header's charset, UTF-8 where it names none or a placeholder (a template's CHARSET)."""
    match = re.search(rb"charset=([A-Za-z0-9_.:-]+)", data[:4096])
    name = match.group(1).decode("ascii") if match else "utf-8"
    return "utf-8" if name.upper() == "CHARSET" else name


def mo_entries(data: bytes, name: str) -> list[CatalogEntry]:
    """A compiled catalog (GNU gettext's MO format: a magic number, then the offsets of two tables of (length,
    offset) strings). msgfmt leaves fuzzy and untranslated entries out unless told otherwise."""
    check(len(data) >= 20, f"{name}: not a gettext MO file (too short)")
    magic = struct.unpack("<I", data[:4])[0]
    order = "<" if magic == 0x950412DE else ">" if magic == 0xDE120495 else ""
    check(bool(order), f"{name}: not a gettext MO file (bad magic number)")
    _, count, originals, translations = struct.unpack(order + "4I", data[4:20])
    try:
        raw = [
            (_mo_string(data, order, originals + 8 * i), _mo_string(data, order, translations + 8 * i))
            for i in range(count)
        ]
    except struct.error as exc:
        raise UserError(f"{name}: not a gettext MO file ({exc})") from None
    encoding = _charset(next((value for key, value in raw if key == b""), b""))
    entries = []
    for index, (key_bytes, value_bytes) in enumerate(raw):
        try:
            key, value = key_bytes.decode(encoding), value_bytes.decode(encoding)
        except LookupError:
            raise UserError(f"{name}: the header names an unknown charset {encoding!r}") from None
        except UnicodeDecodeError as exc:
            raise UserError(f"{name}: entry {index + 1} is not {encoding} ({exc})") from None
        key = key.split("\x04", 1)[-1]  # msgctxt EOT msgid
        msgid, _, plural = key.partition("\0")
        entries.append(CatalogEntry(msgid, plural, tuple(value.split("\0"))))
    return entries


def _mo_string(data: bytes, order: str, at: int) -> bytes:
    length, offset = struct.unpack(order + "2I", data[at : at + 8])
    if offset + length > len(data):
        raise struct.error("a string lies past the file's end")
    return data[offset : offset + length]


def po_entries(data: bytes, name: str) -> list[CatalogEntry]:
    """A PO catalog's entries, obsolete (#~) ones marked so; a line that is no PO is a UserError naming it."""
    try:
        text = data.decode(_charset(data)).lstrip("\ufeff")
    except (LookupError, UnicodeDecodeError) as exc:
        raise UserError(f"{name}: cannot be decoded ({exc})") from None
    entries: list[CatalogEntry] = []
    fields: dict[str, str] = {}
    flags: set[str] = set()
    obsolete, last = False, ""

    def finish() -> None:
        nonlocal obsolete
        if "msgid" in fields:
            forms = [fields[key] for key in sorted((k for k in fields if k.startswith("msgstr")), key=_form_index)]
            entries.append(
                CatalogEntry(fields["msgid"], fields.get("msgid_plural", ""), tuple(forms), frozenset(flags), obsolete)
            )
        fields.clear()
        flags.clear()
        obsolete = False

    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        retired = line.startswith("#~")
        if retired:
            line = line[2:].strip()
            if line.startswith("|") or not line:
                continue
        elif line.startswith("#") or not line:
            if any(k.startswith("msgstr") for k in fields):
                finish()
            if line.startswith("#,"):
                flags.update(flag.strip() for flag in line[2:].split(","))
            continue
        keyword, _, rest = line.partition(" ")
        if line.startswith('"'):
            check(bool(last), f"{name}:{number}: a string continues no keyword")
            fields[last] += _po_string(line, name, number)
            continue
        check(keyword in ("msgctxt", "msgid", "msgid_plural") or keyword.startswith("msgstr"),
              f"{name}:{number}: not a PO line ({line[:40]!r})")  # fmt: skip
        if keyword in ("msgctxt", "msgid") and any(k.startswith("msgstr") for k in fields):
            finish()
        obsolete = obsolete or retired
        fields[keyword], last = _po_string(rest.strip(), name, number), keyword
    finish()
    return entries


def _form_index(key: str) -> int:
    return int(key[7:-1]) if key.startswith("msgstr[") else 0


def _po_string(quoted: str, name: str, number: int) -> str:
    check(len(quoted) >= 2 and quoted[0] == quoted[-1] == '"', f"{name}:{number}: expected a quoted string")
    return re.sub(r"\\(x[0-9a-fA-F]{1,2}|[0-7]{1,3}|.)", _unescape, quoted[1:-1])


def _unescape(match: re.Match[str]) -> str:
    code = match.group(1)
    if code[0] == "x":
        return chr(int(code[1:], 16))
    if code[0].isdigit():
        return chr(int(code, 8))
    return _ESCAPES.get(code, code)


def _xml_entries(path: Path, langs: tuple[str, str], tmx: bool) -> Iterator[tuple[str, str]]:
    """TMX units' (source, target) segments by xml:lang, or XLIFF units' source and non-empty target; a file that
    names another target language than the corpus's is refused."""
    units = ("tu",) if tmx else ("trans-unit", "segment")
    for _, element in xml_events(str(path), str(path), units, () if tmx else ("file",)):
        local = etree.QName(element).localname
        if element.getparent() is None:
            root = "tmx" if tmx else "xliff"
            check(local == root, f"{path}: not {root.upper()} (the root element is <{local}>)")
            if tmx:
                continue
        if local in ("xliff", "file"):  # XLIFF 2.x names its languages on the root, 1.2 on each file
            check_language(path, element.get("trgLang", element.get("target-language", "")), langs[1])
            continue
        if tmx:
            pair = _tmx_pair(element, langs)
            if pair:
                yield pair
        else:
            parts = {etree.QName(child).localname: child for child in element if isinstance(child.tag, str)}
            if "source" in parts and "target" in parts:
                source, target = text_of(parts["source"]), text_of(parts["target"])
                if source.strip() and target.strip():
                    yield source, target
        element.clear()


def _tmx_pair(unit: Any, langs: tuple[str, str]) -> tuple[str, str] | None:
    """A unit's segments in the corpus's two languages (regions aside), None without both."""
    found: dict[str, str] = {}
    for tuv in unit:
        if not isinstance(tuv.tag, str) or etree.QName(tuv).localname != "tuv":
            continue
        lang = tuv.get("{http://www.w3.org/XML/1998/namespace}lang") or tuv.get("lang") or ""
        code = base_language(lang)
        seg = next((c for c in tuv if isinstance(c.tag, str) and etree.QName(c).localname == "seg"), None)
        if seg is not None:
            found.setdefault(code, text_of(seg))
    source, target = found.get(base_language(langs[0]), ""), found.get(base_language(langs[1]), "")
    return (source, target) if source.strip() and target.strip() else None


def xml_events(
    source: str | IO[bytes], name: str, ends: tuple[str, ...], starts: tuple[str, ...] = ()
) -> Iterator[tuple[str, Any]]:
    """iterparse's (event, element) for the root and each of `starts` as they start (their attributes read) and each
    of `ends` as it ends (its content read), parsed safely: no entity resolved, no DTD or network loaded, no huge text
    node, comments and processing instructions left out; a DOCTYPE declaring entities, or XML not well-formed, a
    UserError naming `name`. The one safe way both this module and mtkit.memory read a translation file's XML."""
    events = etree.iterparse(
        source,
        events=("start", "end"),
        resolve_entities=False,
        no_network=True,
        load_dtd=False,
        huge_tree=False,
        remove_comments=True,
        remove_pis=True,
    )
    try:
        for event, element in events:
            if event == "start" and element.getparent() is None:
                dtd = element.getroottree().docinfo.internalDTD
                if dtd is not None and any(True for _ in dtd.iterentities()):
                    raise UserError(f"{name}: the XML declares entities in its DOCTYPE, which mtkit refuses")
                yield event, element
            elif event == "start" and etree.QName(element).localname in starts:
                yield event, element
            elif event == "end" and etree.QName(element).localname in ends:
                yield event, element
    except etree.XMLSyntaxError as exc:
        raise UserError(f"{name}: not well-formed XML ({exc})") from None


def text_of(element: Any) -> str:
    """An element's text, inline codes' content left out and every other element's text kept (xml_events leaves no
    comment or processing instruction in the tree; of an unresolved entity, only the text after it)."""
    pieces = [element.text or ""]
    for child in element:
        if isinstance(child.tag, str) and etree.QName(child).localname not in CODES:
            pieces.append(text_of(child))
        pieces.append(child.tail or "")
    return "".join(pieces)
