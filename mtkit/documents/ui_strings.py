"""A software string (a gettext msgid, an XLIFF segment's text) as the sentences a model gets and its translation
put back together: the placeholders of its format flags (c-format, python-brace-format, ...) and markup tags kept
out of the model by mtkit.text.protect's stand-ins and put back exactly once, its accelerator mark (`_File`,
`&Open`) taken off and put back once, and its line breaks and leading and trailing white space as in the source."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from mtkit.text.protect import DEFAULT_PATTERNS, Masked, Span, mask, unmask
from mtkit.text.sentences import Segmented, option_columns, split_sentences
from mtkit.text.wrapping import Unwrapped, unwrapped

# printf as C, PHP, awk, Lua, Tcl, Perl, Objective-C (%@) and GNU's <PRIu64> macros write it: the flags (' and I
# included), width and precision (also from *arguments, also positional), the length modifiers, the conversion.
_PRINTF = (
    r"%(?:\d+\$)?[-+ #0'I]*(?:\*(?:\d+\$)?|\d+)?(?:\.(?:\*(?:\d+\$)?|\d+))?"
    r"(?:<PRI[diouxX](?:8|16|32|64|PTR|MAX|LEAST\d+|FAST\d+)>|(?:hh|h|ll|l|L|q|j|z|Z|t|I64|I32)?[diouxXeEfFgGaAcspnCSm@%])"
)
_BRACE = r"\{\{|\}\}|\{[\w.\[\]]*(?:![rsa])?(?::[^{}]*)?\}"  # Python's str.format and its kin
_PYTHON = r"%(?:\(\w+\))?[-+ #0]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[hlL]?[diouxXeEfFgGcrsa%]"
_TAG = r"</?[A-Za-z][\w:.-]*(?:\s+[\w:.-]+(?:\s*=\s*(?:\"[^\"]*\"|'[^']*'|[^\s>]+))?)*\s*/?>"
_ENTITY = r"&(?:[A-Za-z]\w*|#\d+|#x[0-9a-fA-F]+);"
_SHELL = r"\$\{\w+\}|\$[A-Za-z_]\w*"
FORMATS: dict[str, str] = {
    "c": _PRINTF,
    "objc": _PRINTF,
    "php": _PRINTF,
    "awk": _PRINTF,
    "lua": _PRINTF,
    "tcl": _PRINTF,
    "perl": _PRINTF + r"|%v[diouxX]",
    "gcc-internal": r"%<|%>|%'|" + _PRINTF.replace("[-+ #0'I]", "[-+ #0'Iqw]"),
    "gfc-internal": r"%[LC]|" + _PRINTF,
    "javascript": _PRINTF + r"|%[jOo]",
    "python": _PYTHON,
    "python-brace": _BRACE,
    "perl-brace": r"\{\w+\}",
    "csharp": r"\{\{|\}\}|\{\d+(?:,\s*-?\d+)?(?::[^{}]*)?\}",
    "java": r"\{\d+(?:,[^{}]*)?\}",
    "java-printf": _PRINTF,
    "qt": r"%L?\d{1,2}",
    "qt-plural": r"%L?n",
    "kde": r"%\d{1,2}",
    "kde-kuit": r"%\d{1,2}|" + _TAG,
    "boost": r"%\d+%|%\|[^|]*\||" + _PRINTF,
    "sh": _SHELL,
    "ruby": r"%\{\w+\}|%<\w+>[-+ #0]*\d*(?:\.\d+)?[a-zA-Z]|" + _PRINTF,
    "ycp": r"%\d|%%",
    "smalltalk": r"%\d+",
    "scheme": r"~[\d,'@:#vV]*[a-zA-Z%&|~^*?()\[\]{}<>;]",
    "lisp": r"~[\d,'@:#vV]*[a-zA-Z%&|~^*?()\[\]{}<>;]",
    "elisp": _PRINTF,
    "librep": _PRINTF,
    "object-pascal": r"%(?:\d+:)?-?\d*(?:\.\d+)?[dDuUxXeEfFgGnNmMsSpP%]",
}
# Kept whatever the flags: markup tags, entities, URLs and e-mail addresses (pofilter's xmltags check wants them as
# written), and what reads as a placeholder in a string without a format flag (a compiled .mo keeps none, and
# xgettext flags only what it recognises): printf's conversions (glibc's %Zd and %.*s too), strftime's and stat's
# %A, %-10b and %Hd (never after a space flag, so "100% done" is none; "%%10f" whole, as pofilter reads it),
# Python's named %(x)s, {name} and {0}, and shell variables. A command's options (--to=si, -a) are kept too:
# translators leave them as written.
_OPTION = r"(?<![\w-])--[A-Za-z][\w-]*(?:=[\w,.:/-]*)?|(?<![\w-])-[A-Za-z](?![\w-])"
_BRACKETED = r"<%[^<>\s]*>"  # a placeholder in angle brackets, "<%s>": pofilter's xmltags reads it as a tag
ALWAYS = rf"{_BRACKETED}|{_TAG}|{_ENTITY}|{DEFAULT_PATTERNS['url']}|{DEFAULT_PATTERNS['email']}|{_OPTION}"
UNFLAGGED = (
    r"%%[-+#0]*\d*(?:\.\d+)?[A-Za-z]|%(?:\d+\$)?[-+#0']*(?:\*|\d*)(?:\.(?:\*|\d+))?(?:hh|ll|[hlLqjztZ])?"
    r"[diouxXeEfFgGcsp%]"
    r"|%[-+#0'_:^]*\d*[HL]?[A-Za-z](?![A-Za-z])|%\(\w+\)[-+#0]*\d*(?:\.\d+)?[a-z]|\{\w*\}|" + _SHELL
)
_NUMBERED = re.compile(r"%\d+\$")  # a positional conversion (%1$s): any order is right
MARKERS = ("_", "&")
_ACCELERATOR = {  # the mark before a letter or digit, never doubled ("&&", "__"), never an entity ("&amp;")
    "_": re.compile(r"(?<![_\w])_(?=[^\W_])|(?<=[^\W\d_])_(?=[^\W\d_])"),
    "&": re.compile(r"(?<![&\w])&(?=[^\W_])(?![A-Za-z]\w*;|#\d+;|#x[0-9a-fA-F]+;)|(?<=[^\W\d_])&(?=[^\W\d_])(?!\w*;)"),
}


def placeholder_pattern(flags: tuple[str, ...]) -> re.Pattern[str]:
    """What a string of these gettext flags keeps as written: each `X-format` flag's placeholders (`no-X-format`
    turns X off), else the unflagged set; markup tags and entities always."""
    kinds = [flag.removeprefix("possible-").removesuffix("-format") for flag in flags if flag.endswith("-format")]
    kinds = [kind for kind in kinds if not kind.startswith("no-")]
    patterns = [FORMATS[kind] for kind in kinds if kind in FORMATS] or [UNFLAGGED]
    return _compiled("|".join(f"(?:{pattern})" for pattern in [ALWAYS, *patterns]))


_CACHE: dict[str, re.Pattern[str]] = {}


def _compiled(pattern: str) -> re.Pattern[str]:
    if pattern not in _CACHE:
        _CACHE[pattern] = re.compile(pattern)
    return _CACHE[pattern]


def spans(text: str, pattern: re.Pattern[str]) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in pattern.finditer(text) if m.end() > m.start()]


def accelerator(text: str, marker: str, pattern: re.Pattern[str]) -> int | None:
    """Where the string's one accelerator mark stands (outside placeholders), or None: none, or more than one."""
    if not marker or marker not in text:
        return None
    kept = spans(text, pattern)
    found = [m.start() for m in _ACCELERATOR[marker].finditer(text) if not any(a <= m.start() < b for a, b in kept)]
    return found[0] if len(found) == 1 else None


def catalog_marker(texts: list[str]) -> str:
    """The accelerator mark a catalog uses: the one that starts a word of short strings ("_File", "Save _As") the
    most often, when some do; "" for a catalog without (a `_` in "file_name" alone is no sign of one)."""
    counts = dict.fromkeys(MARKERS, 0)
    for text in texts:
        if len(text.split()) > 4:
            continue
        for marker in MARKERS:
            found = list(_ACCELERATOR[marker].finditer(text))
            if len(found) == 1 and (found[0].start() == 0 or not text[found[0].start() - 1].isalnum()):
                counts[marker] += 1
    best = max(MARKERS, key=counts.__getitem__)
    return best if counts[best] else ""


@dataclass
class Prepared:
    """A string ready for the model: `texts` (its sentences with letters, placeholders as stand-ins) and what puts
    its translation together (`segmented` masked, the stand-ins, the accelerator's mark and letter)."""

    source: str
    masked: Masked
    segmented: Segmented
    texts: list[str]
    marker: str = ""
    letter: str = ""
    wrapped: Unwrapped = Unwrapped("")  # paragraphs joined from wrapped lines, wrapped again after

    def translation(self, found: dict[str, str], pattern: re.Pattern[str]) -> str:
        """The string's translation from its sentences' (`found`), its placeholders and accelerator put back."""
        pieces = [
            _one_line(found.get(source, "")) or source if _words(source) else source
            for source in self.segmented.sources
        ]
        text = self.segmented.join(pieces)
        if self.masked.spans:
            # Ends stripped first: a stand-in the model lost is put back before the source's closing "\\n", not after.
            text = unmask(text.strip(), self.masked).text
            text = _in_source_order(_unpadded(text, self.masked), self.masked.source, pattern)
        text = _without_invented(text, self.masked.source, pattern)
        text = _put_accelerator(text, self.marker, self.letter, pattern) if self.marker else text
        return self.wrapped.rewrapped(white_space_of(self.source, text))


def prepare(source: str, language: str, pattern: re.Pattern[str], marker: str = "") -> Prepared:
    """The string as sentences for the model: its accelerator (of `marker`) off, the matches of `pattern` as
    stand-ins; sentences without letters are not sent."""
    at = accelerator(source, marker, pattern)
    letter = ""
    text = source
    if at is not None:
        letter, text = source[at + 1], source[:at] + source[at + 1 :]
    wrapped = unwrapped(text)  # a sentence wrapped over lines goes to the model whole
    text = wrapped.text
    columns = option_columns(text)  # kept as written by split_sentences: their options are not stand-ins
    places = [
        (low, high, Span(text[low:high], text[low:high]))
        for low, high in spans(text, pattern)
        if not any(low in column for column in columns)
    ]
    masked = mask(text, places)
    segmented = _cells(split_sentences(masked.text, language))
    texts = [sentence for sentence in segmented.sources if _words(sentence)]
    return Prepared(source, masked, segmented, texts, marker if at is not None else "", letter, wrapped)


_CELL_GAP = re.compile(r"[ \t]{2,}")


def sentences_of(text: str, language: str) -> list[str]:
    """The pieces of a software string `prepare` sends as they stand in the text (its wrapped lines joined, its
    option columns and table cells apart; placeholders as written): what a translation memory's entry is cut into
    to match a catalog's sentences (mtkit.memory.fragments)."""
    return [piece for piece in _cells(split_sentences(unwrapped(text).text, language)).sources if _words(piece)]


def _cells(segmented: Segmented) -> Segmented:
    """The sentences cut again where two or more spaces stand inside one: a table's header or row ("Destination
    Gateway     Flags"), its cells aligned by the spaces, each cell translated alone and the spaces kept."""
    sources, gaps = [], []
    for source, gap in zip(segmented.sources, segmented.gaps):
        pieces = _CELL_GAP.split(source)
        spaces = _CELL_GAP.findall(source)
        sources += pieces
        gaps += spaces + [gap]
    return Segmented(segmented.lead, sources, gaps)


def _unpadded(text: str, masked: Masked) -> str:
    """The spaces mask() put between a stand-in and a letter it was glued to ("%dx%d" sent as "1 x 2") taken out
    where the translation kept them, so that "%dx%d" comes back as written."""
    glued: list[tuple[str, bool, bool]] = []
    at = 0
    for span in masked.spans:
        low = masked.source.find(span.source, at)
        if low < 0:
            continue
        high = at = low + len(span.source)
        before = low > 0 and masked.source[low - 1].isalnum()
        glued.append((span.target, before, high < len(masked.source) and masked.source[high].isalnum()))
    at = 0
    for target, before, after in glued:
        low = text.find(target, at)
        if low < 0:
            continue
        high = low + len(target)
        if after and text[high : high + 1] == " " and text[high + 1 : high + 2].isalnum():
            text = text[:high] + text[high + 1 :]
        if before and low > 1 and text[low - 1] == " " and text[low - 2].isalnum():
            text, low, high = text[: low - 1] + text[low:], low - 1, high - 1
        at = high
    return text


def _unnumbered(text: str, pattern: re.Pattern[str]) -> list[re.Match[str]]:
    """The placeholders of `text` that take their arguments in order: printf's and strftime's without a position
    (`%s`, `%lu`; not `%1$s`, `%%`, `{name}`)."""
    return [
        m
        for m in pattern.finditer(text)
        if m.group()[:1] == "%" and m.group() != "%%" and not _NUMBERED.match(m.group())
    ]


def _in_source_order(text: str, source: str, pattern: re.Pattern[str]) -> str:
    """The translation's in-order placeholders in the source's order: a model that moved `%s` after `%lu` would
    hand the program's arguments to the wrong conversions (msgfmt and pofilter refuse it), so they are written
    back in the order the source has them, each where the model placed one."""
    wanted = [m.group() for m in _unnumbered(source, pattern)]
    found = _unnumbered(text, pattern)
    if len(found) != len(wanted) or [m.group() for m in found] == wanted:
        return text
    pieces, at = [], 0
    for match, placeholder in zip(found, wanted):
        pieces += [text[at : match.start()], placeholder]
        at = match.end()
    return "".join(pieces) + text[at:]


def _without_invented(text: str, source: str, pattern: re.Pattern[str]) -> str:
    """The translation without the placeholders the source does not hold (or holds fewer times), each with a space
    beside it: a model that learnt catalogs' `%s` writes one of its own now and then, or a second beside the one
    put back, and a program would hand it an argument it never passes."""
    allowed = Counter(m.group() for m in pattern.finditer(source))
    extra = []
    for match in pattern.finditer(text):
        if allowed[match.group()] > 0:
            allowed[match.group()] -= 1
        else:
            extra.append((match.start(), match.end()))
    for low, high in reversed(extra):
        before, after = text[:low], text[high:]
        if after.startswith(" ") and (not before or before.endswith(" ")):
            after = after[1:]
        elif before.endswith(" ") and (not after or after[0] in ".,;:!?»«\"'"):
            before = before[:-1]
        text = before + after
    return text


def white_space_of(source: str, text: str) -> str:
    """The translation with the source's leading and trailing white space (a msgid's closing "\\n", its indent):
    msgfmt refuses a msgstr whose ends differ, and a program prints the string as it is."""
    core = text.strip()
    if not core:
        return text
    return source[: len(source) - len(source.lstrip())] + core + source[len(source.rstrip()) :]


def _words(text: str) -> bool:
    """Letters to translate: stand-ins and other numbers alone are copied."""
    return any(char.isalpha() for char in text)


def _one_line(translation: str) -> str:
    """A sentence's translation as one stretch of text: the line breaks are the source's, kept between sentences."""
    return " ".join(translation.split())


def _put_accelerator(text: str, marker: str, letter: str, pattern: re.Pattern[str]) -> str:
    """The mark before the accelerator's letter where the translation has it (at a word's start first), else before
    its first letter; never inside a placeholder."""
    kept = spans(text, pattern)
    letters = [i for i, char in enumerate(text) if char.isalnum() and not any(a <= i < b for a, b in kept)]
    if not letters:
        return text
    same = [i for i in letters if text[i].lower() == letter.lower()]
    starts = [i for i in same if i == 0 or not text[i - 1].isalnum()]
    at = (starts or same or letters)[0]
    return text[:at] + marker + text[at:]
