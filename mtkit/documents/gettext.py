"""gettext PO and POT catalogs as Jobs: each empty entry's msgid (and msgid_plural) go to the model once per distinct
string, and the catalog comes back with those entries filled (flagged fuzzy by default, as Poedit's and Weblate's
pre-translation do, but for those a translation memory's 100% matches filled: Job.exact), their plural forms as the
target language's Plural-Forms count them, and every other line as written: translated and obsolete entries,
comments, flags, contexts and order. A POT's header gets the target language and its plural rule from CLDR (babel)."""

from __future__ import annotations

import gettext
import re
from collections.abc import Callable

from mtkit.documents.job import DocumentError, Job
from mtkit.documents.po_file import Catalog, Entry, escape, read_catalog, string_lines
from mtkit.documents.ui_strings import Prepared, catalog_marker, placeholder_pattern, prepare, white_space_of

DEFAULT_PLURAL = (2, "(n != 1)")  # gettext's own when nothing says otherwise (English, German, ...)
_PLURAL_FORMS = re.compile(r"nplurals\s*=\s*(\d+)\s*;\s*plural\s*=\s*([^;]+?)\s*;?\s*$")
_FIELD = re.compile(r"^([\w-]+):[ \t]*(.*)$")


def po_job(data: bytes, name: str, language: str, target: str = "", fuzzy: bool = True) -> Job:
    """The catalog's empty entries to translate from `language` (the msgids' language) into `target` (for the plural
    forms and a template's header; else the header's Language). `fuzzy`: flag each entry the model filled."""
    catalog = read_catalog(data, name)
    header = next((entry for entry in catalog.entries if entry.header), None)
    fields = _fields(header.msgstr.get(0, "") if header else "")
    empty = [entry for entry in catalog.entries if not entry.header and not entry.translated]
    plural = _Plural(fields, target, name) if any(entry.msgid_plural is not None for entry in empty) else None
    marker = catalog_marker([entry.msgid for entry in catalog.entries if not entry.header])
    prepared: dict[tuple[str, tuple[str, ...]], Prepared] = {}
    for entry in empty:
        for source in (entry.msgid, entry.msgid_plural):
            key = (source, entry.flags)
            if source is not None and key not in prepared:
                prepared[key] = prepare(source, language, placeholder_pattern(entry.flags), marker)
    texts = list(dict.fromkeys(text for each in prepared.values() for text in each.texts))

    def finish(translations: list[str]) -> bytes:
        if len(translations) != len(texts):
            raise ValueError(f"{len(texts)} translations expected, got {len(translations)}")
        found = dict(zip(texts, translations))
        edits: list[tuple[int, int, list[str]]] = []
        for entry in empty:
            pattern = placeholder_pattern(entry.flags)
            whole = _answered(entry)
            one = whole[0] if whole else prepared[(entry.msgid, entry.flags)].translation(found, pattern)
            reviewed = None if whole or entry.msgid_plural is not None else job.for_review(entry.msgid, one, pattern)
            if reviewed is not None:  # a fuzzy match of the whole msgid: flagged fuzzy below, as any filled entry
                one = white_space_of(entry.msgid, reviewed)
            if entry.msgid_plural is None:
                forms = {0: one}
            else:
                many = whole[1] if whole else prepared[(entry.msgid_plural, entry.flags)].translation(found, pattern)
                forms = plural.forms(entry, one, many) if plural else {0: one}
            lines = _msgstr_lines(forms, entry.msgid_plural is not None, catalog.newline)
            edits.append((entry.msgstr_line, entry.end, lines))
            if fuzzy and "fuzzy" not in entry.flags and not _answered(entry) and not _exact(entry):
                edits.append(_fuzzy_flag(catalog, entry))
        legacy = not all(_encodes("".join(lines), catalog.charset) for _, _, lines in edits)
        edits += _header(catalog, header, fields, target, plural, legacy)
        return catalog.encode(catalog.written(edits), name)

    def _answered(entry: Entry) -> list[str] | None:
        """The entry's strings as a memory holds them whole, or None where it lacks one of them."""
        sources = [source for source in (entry.msgid, entry.msgid_plural) if source is not None]
        found = [job.answered.get(source) for source in sources]
        if None in found:
            return None
        return [white_space_of(source, text) for source, text in zip(sources, found)]  # type: ignore[arg-type]

    def _exact(entry: Entry) -> bool:
        """Every sentence of the entry's strings answered by a memory's 100% match."""
        sources = [source for source in (entry.msgid, entry.msgid_plural) if source is not None]
        texts = [text for source in sources for text in prepared[(source, entry.flags)].texts]
        return bool(texts) and all(text in job.exact for text in texts)

    counts = {
        "entries": sum(not entry.header for entry in catalog.entries),
        "filled": len(empty),
        "plural": sum(entry.msgid_plural is not None for entry in empty),
        "sentences": len(texts),
    }
    units = list(dict.fromkeys(source for source, _ in prepared))
    job = Job(texts, finish, counts, units=units)  # finish reads job.exact and job.answered, which run_jobs sets
    return job


class _Plural:
    """The target's plural rule: the header's Plural-Forms when it gives one, else CLDR's for the target (or the
    header's Language) through babel, else gettext's default; `written` says whether the header needs it."""

    def __init__(self, fields: dict[str, str], target: str, name: str) -> None:
        given = _PLURAL_FORMS.match(fields.get("Plural-Forms", ""))
        self.written = given is None or not given.group(1).isdigit()
        if given is not None and not self.written:
            self.count, self.rule = int(given.group(1)), given.group(2)
        else:
            self.count, self.rule = _cldr_plural(target or fields.get("Language", ""))
        try:
            self.index: Callable[[int], int] = gettext.c2py(self.rule)
        except (ValueError, SyntaxError, RecursionError):
            raise DocumentError(f"{name}: the header's Plural-Forms rule {self.rule!r} is not a C expression") from None
        self.one = self.index(1)
        self.only_one = all(self.index(n) != self.one for n in range(1000) if n != 1)

    def forms(self, entry: Entry, one: str, many: str) -> dict[int, str]:
        """Each form's text: the singular's translation in the form of n = 1 when that form is for 1 alone or the
        singular has the plural's placeholders (msgfmt wants a form for 21 to say %d), the plural's in the others."""
        pattern = placeholder_pattern(entry.flags)
        same = sorted(pattern.findall(entry.msgid)) == sorted(pattern.findall(entry.msgid_plural or ""))
        singular = one if self.only_one or same else many
        return {form: singular if form == self.one else many for form in range(self.count)}

    @property
    def header(self) -> str:
        return f"nplurals={self.count}; plural={self.rule};"


def _cldr_plural(language: str) -> tuple[int, str]:
    """CLDR's plural rule for the language as gettext writes it (babel's table), or gettext's default."""
    from babel.core import UnknownLocaleError
    from babel.messages.plurals import get_plural

    code = language.strip().replace("-", "_")
    if not code:
        return DEFAULT_PLURAL
    try:
        found = get_plural(code)
    except (UnknownLocaleError, ValueError):
        try:
            found = get_plural(code.split("_")[0])
        except (UnknownLocaleError, ValueError):
            return DEFAULT_PLURAL
    return found.num_plurals, found.plural_expr


def _fields(header: str) -> dict[str, str]:
    return {m.group(1): m.group(2).strip() for m in map(_FIELD.match, header.split("\n")) if m}


def _msgstr_lines(forms: dict[int, str], plural: bool, newline: str) -> list[str]:
    if not plural:
        return string_lines("msgstr", forms[0], newline)
    return [line for form, text in sorted(forms.items()) for line in string_lines(f"msgstr[{form}]", text, newline)]


def _fuzzy_flag(catalog: Catalog, entry: Entry) -> tuple[int, int, list[str]]:
    """The edit that flags the entry: `fuzzy` first among its flags (as msgcat writes it), or a `#, fuzzy` line
    where the flags go: after the other comments, before the previous msgid (`#|`) and the keywords."""
    if entry.flags_line is not None:
        line = catalog.lines[entry.flags_line]
        ending = line[len(line.rstrip("\r\n")) :] or catalog.newline
        return entry.flags_line, entry.flags_line + 1, ["#, " + ", ".join(("fuzzy", *entry.flags)) + ending]
    at = entry.keyword
    while at > entry.start and catalog.lines[at - 1].lstrip().startswith("#|"):
        at -= 1
    return at, at, ["#, fuzzy" + catalog.newline]


def _encodes(text: str, charset: str) -> bool:
    try:
        text.encode(charset)
    except UnicodeEncodeError:
        return False
    return True


def _header(
    catalog: Catalog,
    header: Entry | None,
    fields: dict[str, str],
    target: str,
    plural: _Plural | None,
    legacy: bool = False,
) -> list[tuple[int, int, list[str]]]:
    """A template's header made the target's: its Language, its plural rule (when plural entries were filled and it
    had none) and UTF-8 for CHARSET; a catalog without a header that needs the rule gets one. `legacy`: the machine's
    translations hold characters the catalog's charset lacks (an ISO-8859-1 catalog, a German "ẞ"), so the catalog
    is written in UTF-8 and its header says so, as `msgconv --to-code=UTF-8` would."""
    changes: dict[str, str] = {}
    if target and not fields.get("Language"):
        changes["Language"] = target.replace("-", "_")
    if plural is not None and plural.written:
        changes["Plural-Forms"] = plural.header
    content_type = fields.get("Content-Type", "")
    if "charset=CHARSET" in content_type or legacy and header is not None:
        changes["Content-Type"] = re.sub(r"charset=[^\s;]+", "charset=UTF-8", content_type)
        catalog.charset = "UTF-8"
    if not changes or header is None and "Plural-Forms" not in changes:
        return []  # Language alone is not worth a header the catalog never had
    text = header.msgstr.get(0, "") if header else ""
    for key, value in changes.items():
        line = re.compile(rf"^{re.escape(key)}:[^\n]*(?:\n|$)", re.M)
        if line.search(text):
            text = line.sub(lambda _, k=key, v=value: f"{k}: {v}\n", text, count=1)
        else:
            text += ("" if not text or text.endswith("\n") else "\n") + f"{key}: {value}\n"
    # the fields one to a line, as xgettext writes them (never wrapped)
    lines = [f'msgstr ""{catalog.newline}'] + [
        f'"{escape(piece)}"{catalog.newline}' for piece in re.findall(r"[^\n]*\n|[^\n]+$", text)
    ]
    if header is None:
        return [(0, 0, [f'msgid ""{catalog.newline}', *lines, catalog.newline])]
    return [(header.msgstr_line, header.end, lines)]
