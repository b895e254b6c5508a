"""A gettext PO or POT file as its lines and the entries they hold, each with where its parts stand, so that a filled
entry's msgstr lines are replaced and every other byte comes back as written; strings unescaped and escaped as GNU
gettext does, decoded in the charset the header names. Syntax only: what is translated is mtkit.documents.gettext's."""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, field

from mtkit.documents.job import DocumentError

MAX_LINE = 1 << 20  # characters; GNU tools wrap at 79, and a megabyte line is an attack or a broken file
_KEYWORD = re.compile(r"(msgctxt|msgid_plural|msgid|msgstr)(?:\[(\d+)\])?[ \t]+(\".*)$")
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"[ \t]*$')
_CHARSET = re.compile(rb"Content-Type:[^\"\n]*?charset=([A-Za-z0-9_.:-]+)")
_UNESCAPE = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v", '"': '"', "\\": "\\"}
_ESCAPE = {value: "\\" + key for key, value in _UNESCAPE.items()}
_ESCAPED = re.compile(r"\\(?:([0-7]{1,3})|x([0-9a-fA-F]{1,2})|(.))", re.S)
WIDTH = 79  # GNU msgcat's line width


@dataclass
class Entry:
    """One entry: `start` its first line (comments included), `keyword` its first keyword line, `msgstr` its first
    msgstr line, `end` the line after its last; `flags_line` the `#,` line, if any. msgstr maps each form's index
    (0 for a plain msgstr) to its text."""

    start: int
    keyword: int
    line: int  # 1-based, for messages
    flags_line: int | None = None
    flags: tuple[str, ...] = ()
    msgctxt: str | None = None
    msgid: str = ""
    msgid_plural: str | None = None
    msgstr: dict[int, str] = field(default_factory=dict)
    msgstr_line: int = -1
    end: int = -1

    @property
    def translated(self) -> bool:
        return any(self.msgstr.values())

    @property
    def header(self) -> bool:
        return self.msgid == "" and self.msgctxt is None


@dataclass
class Catalog:
    """The decoded file: `lines` (each with its line ending), the live entries in order (obsolete `#~` entries are
    comment lines to this reader, so they are never touched), the byte order mark, charset and line ending."""

    lines: list[str]
    entries: list[Entry]
    bom: str
    charset: str
    newline: str

    def written(self, edits: list[tuple[int, int, list[str]]]) -> str:
        """The text with each edit's lines in place of lines[start:end] (an insertion when start == end, before a
        replacement at the same line); every other line as it was."""
        lines = list(self.lines)
        for start, end, new in sorted(edits, key=lambda edit: (edit[0], edit[1]), reverse=True):
            lines[start:end] = new
        text = "".join(lines)
        if self.lines and not self.lines[-1].endswith(("\n", "\r")) and text.endswith(self.newline):
            text = text[: -len(self.newline)]  # the file ended without a line break: so does its translation
        return self.bom + text

    def encode(self, text: str, name: str) -> bytes:
        try:
            return text.encode(self.charset)
        except UnicodeEncodeError as exc:
            raise DocumentError(
                f"{name}: the translation holds {text[exc.start]!r}, which the catalog's charset {self.charset} "
                "cannot: convert it first (msgconv --to-code=UTF-8)"
            ) from None


def read_catalog(data: bytes, name: str) -> Catalog:
    """The catalog, or a DocumentError naming the file and line: a line over MAX_LINE, bytes its charset does not
    decode, or text that is not PO syntax."""
    _check_lines(data, name)
    charset = _charset(data, name)
    try:
        text = data.decode(charset)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DocumentError(
            f"{name} line {line}: not {charset} text (byte 0x{data[exc.start]:02x}); the header's Content-Type "
            "names the charset"
        ) from None
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    lines = text[len(bom) :].splitlines(keepends=True)
    newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    return Catalog(lines, _entries(lines, name), bom, charset, newline)


def _check_lines(data: bytes, name: str) -> None:
    """A line over MAX_LINE refused before anything is decoded (without copying the file line by line)."""
    at = line = 0
    while at < len(data):
        end = data.find(b"\n", at)
        end = len(data) if end < 0 else end
        line += 1
        if end - at > MAX_LINE:
            raise DocumentError(f"{name} line {line}: {end - at} bytes long, over the limit of {MAX_LINE}")
        at = end + 1


def _charset(data: bytes, name: str) -> str:
    """The charset of the header's Content-Type (UTF-8 for a template's CHARSET, or none given)."""
    found = _CHARSET.search(data[: 1 << 16])
    charset = found.group(1).decode("ascii") if found else "UTF-8"
    if charset.upper() == "CHARSET":
        return "UTF-8"
    try:
        codecs.lookup(charset)
    except LookupError:
        raise DocumentError(f"{name}: the header names the charset {charset!r}, which mtkit does not know") from None
    return charset


def unescape(body: str) -> str:
    """A PO string's body (between its quotes) as text."""

    def one(match: re.Match[str]) -> str:
        octal, hexa, char = match.groups()
        if octal is not None:
            return chr(int(octal, 8))
        if hexa is not None:
            return chr(int(hexa, 16))
        return _UNESCAPE.get(char, "\\" + char)

    return _ESCAPED.sub(one, body)


def escape(text: str) -> str:
    return "".join(_ESCAPE.get(char, char) for char in text)


def string_lines(keyword: str, text: str, newline: str) -> list[str]:
    """`keyword "text"` as msgcat writes it: one line when it fits in WIDTH and holds no inner line break, else
    `keyword ""` and a line per piece, broken after each \\n and after spaces."""
    escaped = escape(text)
    pieces = [piece for piece in re.split(r"(?<=\\n)", escaped) if piece]
    if len(pieces) <= 1 and len(keyword) + len(escaped) + 3 <= WIDTH:
        return [f'{keyword} "{escaped}"{newline}']
    lines = [f'{keyword} ""{newline}']
    for piece in pieces:
        line = ""
        for word in re.findall(r"[^ ]* *|[^ ]+$", piece):
            if line and len(line) + len(word) + 2 > WIDTH:
                lines.append(f'"{line}"{newline}')
                line = ""
            line += word
        if line:
            lines.append(f'"{line}"{newline}')
    return lines


def _entries(lines: list[str], name: str) -> list[Entry]:
    """The live entries: comments (not `#~`) gather before a keyword; msgctxt or msgid starts an entry, its msgstr
    lines and their continuations end it."""
    entries: list[Entry] = []
    entry: Entry | None = None
    part = ""  # the keyword whose string a continuation line extends
    comments: int | None = None  # the first comment line of the entry to come
    flags: tuple[int, tuple[str, ...]] | None = None

    def close() -> None:
        nonlocal entry, part
        if entry is not None:
            if entry.msgstr_line < 0:
                raise DocumentError(f"{name} line {entry.line}: an entry without msgstr")
            entries.append(entry)
        entry, part = None, ""

    for index, raw in enumerate(lines):
        line = raw.strip()
        where = f"{name} line {index + 1}"
        if not line:
            if entry is not None and entry.msgstr_line < 0:
                raise DocumentError(f"{where}: a blank line inside an entry, before its msgstr")
            close()
            comments, flags = None, None
        elif line.startswith("#"):
            if entry is not None and entry.msgstr_line < 0:
                raise DocumentError(f"{where}: a comment inside an entry, before its msgstr")
            close()
            if line.startswith("#~"):
                comments, flags = None, None  # an obsolete entry: never the next one's
                continue
            comments = index if comments is None else comments
            if line.startswith("#,"):
                flags = (index, tuple(flag.strip() for flag in line[2:].split(",") if flag.strip()))
        elif line.startswith('"'):
            if entry is None or not part:
                raise DocumentError(f"{where}: a string outside an entry")
            _extend(entry, part, _string(line, where))
            entry.end = index + 1
        else:
            match = _KEYWORD.match(line)
            if match is None:
                raise DocumentError(f"{where}: not PO syntax ({line[:40]!r})")
            keyword, number, rest = match.groups()
            value = _string(rest, where)
            if keyword in ("msgctxt", "msgid") and entry is not None and entry.msgstr_line >= 0:
                close()
            if keyword == "msgctxt" or (keyword == "msgid" and entry is None):
                if entry is not None:
                    raise DocumentError(f"{where}: {keyword} twice in one entry")
                start = index if comments is None else comments
                entry = Entry(start, index, index + 1)
                if flags is not None:
                    entry.flags_line, entry.flags = flags
                comments, flags = None, None
            elif entry is None:
                raise DocumentError(f"{where}: {keyword} before its msgid")
            part = _begin(entry, keyword, number, value, index, where)
            entry.end = index + 1
    if entry is not None:
        close()
    return entries


def _begin(entry: Entry, keyword: str, number: str | None, value: str, index: int, where: str) -> str:
    """The keyword's string stored; the part a continuation extends returned."""
    if keyword == "msgctxt":
        entry.msgctxt = value
        return "msgctxt"
    if keyword == "msgid":
        if entry.msgid or entry.msgstr_line >= 0:
            raise DocumentError(f"{where}: msgid twice in one entry")
        entry.msgid = value
        return "msgid"
    if keyword == "msgid_plural":
        entry.msgid_plural = value
        return "msgid_plural"
    if number is None and entry.msgid_plural is not None or number is not None and entry.msgid_plural is None:
        raise DocumentError(f"{where}: msgstr{'' if number is None else '[]'} does not match the msgid's plural")
    form = int(number or 0)
    if form in entry.msgstr:
        raise DocumentError(f"{where}: msgstr[{form}] twice in one entry")
    if entry.msgstr_line < 0:
        entry.msgstr_line = index
    entry.msgstr[form] = value
    return f"msgstr{form}"


def _extend(entry: Entry, part: str, value: str) -> None:
    if part.startswith("msgstr"):
        form = int(part[len("msgstr") :])
        entry.msgstr[form] += value
    elif part == "msgctxt":
        entry.msgctxt = (entry.msgctxt or "") + value
    elif part == "msgid":
        entry.msgid += value
    else:
        entry.msgid_plural = (entry.msgid_plural or "") + value


def _string(text: str, where: str) -> str:
    match = _STRING.match(text)
    if match is None:
        raise DocumentError(f"{where}: a string not closed by its quote")
    return unescape(match.group(1))
