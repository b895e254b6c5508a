"""Markdown as a Job: the text of paragraphs, headings, list items, quotes, table cells and HTML blocks translated by
sentence; front matter, code, link definitions, markers, indentation and line breaks byte for byte. markdown-it-py
finds the blocks; a block's inline markdown becomes HTML that mtkit.text.markup translates across inline tags, and
delimiters, link targets ("](url)", "][ref]"), code spans, images, autolinks and raw tags come back as written. A
soft-wrapped paragraph comes back one line per hard break: its lines are one text, so its translation is not cut
where the source was. HTML blocks go through markup too (it keeps their tags, comments and code as written)."""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from markdown_it import MarkdownIt
from markdown_it.helpers import parseLinkLabel
from markdown_it.rules_inline import autolink, backtick, escape, image, link, newline
from markdown_it.rules_inline.state_inline import StateInline
from markdown_it.token import Token

from mtkit.documents.job import Job
from mtkit.documents.plain import decode_text, encode_text, one_line
from mtkit.text.markup import HtmlTranslation

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
_FRONT = re.compile(r"(---|\+\+\+)[ \t]*(?:\r\n|\r|\n)")
_INLINE = ("em", "strong", "s", "a")  # the elements that stand for markdown's delimiters and link text
# A translation's characters that markdown would read as markup: backslash before punctuation, code, emphasis
# (an underscore inside a word is not), links, raw HTML, entities, strikethrough.
_SPECIAL = re.compile(
    r"\\(?=[!-/:-@\[-`{-~])|[`*\[\]]|(?<![^\W_])_|_(?![^\W_])|<(?=[A-Za-z/!?])|&(?=#?\w+;)|~(?=~)|(?<=~)~"
)
_LINE_START = re.compile(r"[#>+=-]|\d{1,9}(?=[.)](?:\s|$))")  # a paragraph's line that starts so is another block
_TAG = re.compile(
    r'<code data-mtkit="(\d+)">.*?</code>|<(em|strong|s|a|br) data-mtkit="(\d+)">|</(em|strong|s|a)>|<!--.*?-->'
    r"|<(\w*)[^>]*>",
    re.S,
)


@dataclass
class _Block:
    """A block's text as HTML in translation, and the source ranges its pieces replace (one per hard line break)."""

    translation: HtmlTranslation
    render: Callable[[str], list[str]]  # the translated HTML to the pieces, one per range
    ranges: list[tuple[int, int]] = field(default_factory=list)


def markdown_job(data: bytes, name: str, language: str) -> Job:
    """A Markdown file's sentences, and the file back with only their text changed."""
    bom, text = decode_text(data, name)
    head = front_matter(text)
    body = text[len(head) :]
    blocks = _blocks(body, language)
    texts = [text for block in blocks for text in block.translation.first]

    def finish(translations: list[str]) -> bytes:
        out, at, used = [head], 0, 0
        for block in blocks:
            mine = translations[used : used + len(block.translation.first)]
            used += len(mine)
            block.translation.second([one_line(t) for t in mine])
            for (start, end), piece in zip(block.ranges, block.render(block.translation.result([]))):
                out += [body[at:start], piece]
                at = end
        return encode_text(bom, "".join(out) + body[at:])

    counts = {"blocks": len(blocks), "front_matter_lines": head.count("\n")}
    return Job(texts, finish, counts | {"sentences": sum(b.translation.placements["sentences"] for b in blocks)})


def front_matter(text: str) -> str:
    """The YAML (--- to --- or ...) or TOML (+++ to +++) block at the top, with its closing line; "" if none."""
    opening = _FRONT.match(text)
    if not opening:
        return ""
    closers = ("---", "...") if opening.group(1) == "---" else ("+++",)
    for line in _LINE.finditer(text, opening.end()):
        if line.group().strip() in closers:
            return text[: line.end()]
    return ""


def _parser() -> MarkdownIt:
    """CommonMark with tables and strikethrough, its inline rules recording where their tokens stand in the text."""
    md = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    kinds = {"newline": newline, "escape": escape, "backticks": backtick, "link": link, "image": image}
    for rule_name, rule in (kinds | {"autolink": autolink}).items():
        md.inline.ruler.at(rule_name, _recording(rule))
    return md


def _recording(rule: Callable[[StateInline, bool], bool]) -> Callable[[StateInline, bool], bool]:
    """The rule, and on its first non-text token the source span it took (meta "span") and for a link where its
    text ends (meta "label")."""
    wanted = ("hardbreak", "code_inline", "link_open", "image")

    def run(state: StateInline, silent: bool) -> bool:
        start, count = state.pos, len(state.tokens)
        label = parseLinkLabel(state, start, True) if rule is link and not silent and state.src[start] == "[" else -1
        done = rule(state, silent)
        token = next((token for token in state.tokens[count:] if token.type in wanted), None)
        if done and not silent and token is not None:
            if rule is newline:  # a hard break's trailing spaces belong to it, not to the text before
                start = len(state.src[:start].rstrip(" "))
            token.meta = {"span": (start, state.pos), "label": label}
        return done

    return run


def _blocks(body: str, language: str) -> list[_Block]:
    """The blocks with text to translate, in document order."""
    lines = _LINE.findall(body)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    tokens = _parser().parse(body)
    blocks, row, cursor = [], 0, 0
    for before, token in zip([None, *tokens], tokens):
        if token.type == "tr_open" and token.map:
            row, cursor = token.map[0], starts[token.map[0]]
        elif token.type == "html_block" and token.map:
            blocks.append(_html_block(body, starts, token, language))
        elif token.type == "inline" and token.map and before is not None:
            cell = before.type in ("th_open", "td_open")
            if cell:
                found = _cell(body[cursor : starts[row + 1]], token.content)
                if found is None:
                    continue
                cursor += found[0]
                places, ends = [cursor], [cursor + found[1]]
                cursor = ends[0]
            else:
                placed = _place(token.content, lines, starts, token.map[0])
                if placed is None:  # markdown-it changed the text (tabs, NUL): kept as written
                    continue
                places, ends = placed
            blocks.append(_text_block(token, places, ends, language, cell, before.type == "paragraph_open"))
    return [block for block in blocks if block.translation.first]


def _place(content: str, lines: list[str], starts: list[int], first: int) -> tuple[list[int], list[int]] | None:
    """Where each of the content's lines starts and ends in the body; None if one is not there as written."""
    places, ends = [], []
    for k, piece in enumerate(content.split("\n")):
        line = lines[first + k].rstrip("\r\n") if first + k < len(lines) else ""
        if piece and line.endswith(piece):
            at = len(line) - len(piece)
        elif piece and line.rstrip(" \t").endswith(piece):
            at = len(line.rstrip(" \t")) - len(piece)
        else:
            at = line.find(piece)  # an ATX heading's closing #'s follow its text
        if at < 0:
            return None
        places.append(starts[first + k] + at)
        ends.append(starts[first + k] + at + len(piece))
    return places, ends


def _cell(row: str, content: str) -> tuple[int, int] | None:
    """Where a table cell's text stands in the rest of its row, and its length as written (a "|" in it escaped)."""
    for written in (content, content.replace("|", "\\|")):
        at = row.find(written)
        if content and at >= 0:
            return at, len(written)
    return None


def _html_block(body: str, starts: list[int], token: Token, language: str) -> _Block:
    """An HTML block translated as HTML, when its lines are in the body as markdown-it read them (not inside a
    block quote or list, whose markers it took off)."""
    start, end = starts[token.map[0]], starts[min(token.map[1], len(starts) - 1)]
    written = body[start:end]
    if re.sub(r"\r\n?", "\n", written).rstrip("\n") != token.content.rstrip("\n"):
        return _Block(HtmlTranslation("", "en"), lambda result: [])
    return _Block(HtmlTranslation(written, language), lambda result: [result], [(start, end)])


def _text_block(token: Token, places: list[int], ends: list[int], language: str, cell: bool, paragraph: bool) -> _Block:
    """A paragraph's, heading's or cell's inline markdown as HTML in translation; one range per hard break."""
    content = token.content
    document, table, breaks, apart = _inline_html(token.children or [], content)

    def where(offset: int) -> int:
        k = content.count("\n", 0, offset)
        if offset == len(content):
            return ends[k]
        return places[k] + offset - (content.rfind("\n", 0, offset) + 1)

    bounds = [0] + [edge for span in breaks for edge in span] + [len(content)]
    ranges = [(where(bounds[i]), where(bounds[i + 1])) for i in range(0, len(bounds), 2)]
    return _Block(
        HtmlTranslation(document, language), lambda result: _markdown(result, table, cell, paragraph, apart), ranges
    )


def _inline_html(
    tokens: list[Token], src: str
) -> tuple[str, list[tuple[str, str]], list[tuple[int, int]], dict[int, tuple[bool, bool]]]:
    """Inline tokens as HTML: text escaped, delimiters and link text as inline elements with an index into the
    table of what they were written as, code, images and autolinks as code elements, hard breaks as <br>. Beside
    them, for each code element by its index, whether no letter or digit touched it in the source, before and
    after: a translation's word put there is kept apart by a space ("`x`, then" whose piece ", then" comes back
    "dann" must not give "`x`dann")."""
    out: list[str] = []
    table: list[tuple[str, str]] = []
    breaks: list[tuple[int, int]] = []
    apart: dict[int, tuple[bool, bool]] = {}
    inside_autolink = False
    for token in tokens:
        kind, key = token.type, f' data-mtkit="{len(table)}">'
        if inside_autolink:
            inside_autolink = kind != "link_close"
        elif kind in ("text", "text_special"):
            out.append(html.escape(token.content, quote=False))
        elif kind == "softbreak":
            out.append(" ")  # a wrapped line goes on: the sentence does too
        elif kind == "hardbreak":
            breaks.append(token.meta["span"])
            out.append("<br" + key)
            table.append(("", ""))
        elif kind in ("code_inline", "image") or kind == "link_open" and token.markup == "autolink":
            start, end = token.meta["span"]
            out.append("<code" + key + html.escape(src[start:end], quote=False) + "</code>")
            apart[len(table)] = (not src[start - 1 : start].isalnum(), not src[end : end + 1].isalnum())
            table.append((src[start:end], ""))
            inside_autolink = kind == "link_open"
        elif kind == "link_open":
            (start, end), label = token.meta["span"], token.meta["label"]
            out.append("<a" + key)
            table.append((src[start], src[label:end]))  # "[" and "](url)" as written
        elif kind in ("em_open", "strong_open", "s_open"):
            out.append(f"<{token.tag}" + key)
            table.append((token.markup, token.markup))
        elif kind in ("em_close", "strong_close", "s_close", "link_close"):
            out.append(f"</{token.tag}>")
        elif kind == "html_inline":
            out.append(token.content)
    return "".join(out), table, breaks, apart


def _markdown(
    translated: str, table: list[tuple[str, str]], cell: bool, paragraph: bool, apart: dict[int, tuple[bool, bool]]
) -> list[str]:
    """The translated HTML back as markdown, one piece per hard break: the elements as they were written, the text
    escaped where markdown would read it as markup, a code element apart from words where it was."""
    writer = _Writer(table, cell, paragraph)
    at = 0
    for match in _TAG.finditer(translated):
        writer.text(html.unescape(translated[at : match.start()]))
        at = match.end()
        code, name, index, closing, other = match.groups()
        if code is not None:
            writer.code(table[int(code)][0], *apart.get(int(code), (False, False)))
        elif name == "br":
            writer.pieces.append([])
        elif name is not None:
            writer.open(name, int(index))
        elif closing is not None and writer.opened[closing]:
            writer.close(closing, match.group())
        else:
            if other in _INLINE:  # the document's own tag of that name: its end tag is written as it came
                writer.opened[other].append((None, 0))
            writer.add(match.group())
    writer.text(html.unescape(translated[at:]))
    return ["".join(piece) for piece in writer.pieces]


@dataclass
class _Writer:
    """Markdown written piece by piece (a new piece after each hard break)."""

    table: list[tuple[str, str]]
    cell: bool
    paragraph: bool
    pieces: list[list[str]] = field(default_factory=lambda: [[]])
    opened: dict[str, list[tuple[int | None, int]]] = field(default_factory=lambda: {name: [] for name in _INLINE})
    moving: int = -1  # where white space after opening delimiters goes: before them ("* x*" is no emphasis)
    spaced: bool = False  # a word that comes next is kept apart from the code span just written

    def add(self, written: str) -> None:
        self.pieces[-1].append(written)
        self.moving = -1
        self.spaced = False

    def code(self, written: str, apart_before: bool, apart_after: bool) -> None:
        """A code span, image or autolink as written, a space between it and a word where the source had none."""
        out = self.pieces[-1]
        if apart_before and "".join(out).rstrip("*_~")[-1:].isalnum():  # a word, or one in closed emphasis
            out.append(" ")
        self.add(written)
        self.spaced = apart_after

    def text(self, text: str) -> None:
        out = self.pieces[-1]
        if not text:
            return
        if self.spaced and text[0].isalnum():
            text = " " + text
        if self.moving >= 0 and text[0].isspace():
            out.insert(self.moving, text[: len(text) - len(text.lstrip())])
            text = text.lstrip()
        escaped = _SPECIAL.sub(lambda m: "\\" + m.group(), text)
        if self.cell:
            escaped = escaped.replace("|", "\\|")
        start = _LINE_START.match(escaped) if self.paragraph and not out else None
        if start:  # "1. " and "# " at a line's start would make a list or a heading
            escaped = (
                escaped[: start.end()] + "\\" + escaped[start.end() :] if start.group()[0].isdigit() else "\\" + escaped
            )
        self.add(escaped)

    def open(self, name: str, index: int) -> None:
        out = self.pieces[-1]
        self.opened[name].append((index, len(out)))
        moving = self.moving if self.moving >= 0 else len(out)
        out.append(self.table[index][0])
        self.moving = moving

    def close(self, name: str, written: str) -> None:
        out = self.pieces[-1]
        index, place = self.opened[name].pop()
        if index is None:
            out.append(written)
        elif name != "a" and place == len(out) - 1:  # nothing left inside: no delimiters around nothing
            out.pop()
        else:
            space = ""
            while out and out[-1] != out[-1].rstrip():  # "*x *" is no emphasis: the space goes after
                space = out[-1][len(out[-1].rstrip()) :] + space
                out[-1] = out[-1].rstrip()
            out += [self.table[index][1], space]
        self.moving = -1
