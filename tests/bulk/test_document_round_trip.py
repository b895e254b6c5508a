"""Every document format round-trips through the real model: a document made by its own library (python-docx,
python-pptx, odfpy, EbookLib, or written by hand for txt, html, md, srt and vtt), with a heading or header, a list,
a table, an image, bold words inside a sentence, a link and a footnote where the format has them, whose every text
is one of the 64 Multi30k sentences overfit_run memorized. All ten go through one translate_documents call; each
output is opened by its format's reader, every text node with words is German to the language detector (none
left in English), there are as many as the source had, and everything that is not text is unchanged: the zip's
members (byte for byte where no text is), the XML trees without their text, the tags, markup and cue timings."""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from lxml import etree

from mtkit.bulk.document_translation import translate_documents
from mtkit.documents.format_runs import W
from mtkit.engines.factory import load_translator
from mtkit.language_id import LanguageDetector
from mtkit.text.sentences import wordy
from tests.conftest import MULTI30K, read_gz_lines
from tests.documents.test_office import (
    DC_TITLE,
    add_footnote,
    in_paragraph,
    in_run,
    members,
    members_with,
    odf_styles,
    odp_page,
    png,
    skeleton,
    text_nodes,
)

docx = pytest.importorskip("docx")
pptx = pytest.importorskip("pptx")
odf = pytest.importorskip("odf")
epub = pytest.importorskip("ebooklib.epub")
markdown_it = pytest.importorskip("markdown_it")

LINES = read_gz_lines(MULTI30K / "train.en.gz", 64)  # the pairs overfit_run memorized
TITLE, HEADING, HEADER, FOOTER, NOTE, NOTES = (LINES[i] for i in (14, 16, 8, 9, 2, 52))
BEFORE, AFTER, ITEMS, CELLS = LINES[4], LINES[54], (LINES[18], LINES[23]), (LINES[26], LINES[34], LINES[38], LINES[40])
# ("A man in a", " neon green and orange uniform ", "is driving on a green tractor."): the middle in bold
BOLD = LINES[13].partition(" neon green and orange uniform ")
LINKED = LINES[42].partition(" a silver vehicle")  # "A man walks by", " a silver vehicle", "."
FORMATS = ("txt", "html", "md", "docx", "pptx", "odt", "odp", "epub", "srt", "vtt")
XHTML = "{http://www.w3.org/1999/xhtml}"
NCX_TEXT = "{http://www.daisy.org/z3986/2005/ncx/}text"
URL = "https://example.com/"
# The zip members that hold the document's text: each must change, keeping its tree; every other stays byte for byte.
TEXT_PARTS = {
    "docx": {"word/document.xml", "word/header1.xml", "word/footer1.xml", "word/footnotes.xml", "docProps/core.xml"},
    "pptx": {"ppt/slides/slide1.xml", "ppt/notesSlides/notesSlide1.xml", "docProps/core.xml"},
    "odt": {"content.xml", "styles.xml", "meta.xml"},
    "odp": {"content.xml", "meta.xml"},
    "epub": {"EPUB/chapter1.xhtml", "EPUB/nav.xhtml", "EPUB/toc.ncx", "EPUB/content.opf"},
}


def test_the_texts_are_whole_sentences() -> None:
    """The bold and the linked words are found in their sentences, and every sentence ends with a full stop (so
    two on a line are cut where they end)."""
    assert BOLD[1] and LINKED[1]
    texts = (TITLE, HEADING, HEADER, FOOTER, NOTE, NOTES, BEFORE, AFTER, LINES[13], LINES[42], *ITEMS, *CELLS)
    assert all(text.endswith(".") for text in texts)


# the documents, each made by its own library


def make_txt() -> bytes:
    return f"{HEADING}\n\n  {BEFORE} {AFTER}\n***\n{ITEMS[0]}\n{ITEMS[1]}\n".encode()


def make_html() -> bytes:
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{TITLE}</title></head>\n<body>\n'
        f"<header><h1>{HEADING}</h1></header>\n<p>{BOLD[0]} <b>{BOLD[1].strip()}</b> {BOLD[2]} "
        f'{LINKED[0]} <a href="{URL}">{LINKED[1].strip()}</a>{LINKED[2]}</p>\n'
        f'<p>{BEFORE} <img src="dot.png" alt="dot"> {AFTER}</p>\n'
        f"<ul><li>{ITEMS[0]}</li><li>{ITEMS[1]}</li></ul>\n"
        f"<table><tr><td>{CELLS[0]}</td><td>{CELLS[1]}</td></tr><tr><td>{CELLS[2]}</td><td>{CELLS[3]}</td></tr>"
        "</table>\n</body></html>\n"
    ).encode()


def make_md() -> bytes:
    return (
        f"# {HEADING}\n\n{BOLD[0]} **{BOLD[1].strip()}** {BOLD[2]} {LINKED[0]} "
        f'[{LINKED[1].strip()}]({URL} "a link"){LINKED[2]}\n\n{BEFORE} ![dot](dot.png) {AFTER}\n\n'
        f"- {ITEMS[0]}\n- {ITEMS[1]}\n\n| {CELLS[0]} | {CELLS[1]} |\n|---|---|\n| {CELLS[2]} | {CELLS[3]} |\n"
    ).encode()


FOOTNOTES = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    '<w:footnotes xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
    '<w:footnote w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:footnote>'
    '<w:footnote w:id="1"><w:p><w:r><w:footnoteRef/></w:r><w:r><w:t xml:space="preserve"> '
    f"{NOTE}</w:t></w:r></w:p></w:footnote></w:footnotes>"
).encode()


def make_docx() -> bytes:
    from docx.opc.constants import RELATIONSHIP_TYPE
    from docx.oxml import parse_xml
    from docx.oxml.ns import nsdecls, qn
    from docx.oxml.parser import OxmlElement

    document = docx.Document()
    document.core_properties.title = TITLE
    document.add_heading(HEADING, level=1)
    paragraph = document.add_paragraph(BOLD[0] + " ")
    paragraph.add_run(BOLD[1].strip()).bold = True
    paragraph.add_run(" " + BOLD[2])
    paragraph._p.append(parse_xml(f'<w:r {nsdecls("w")}><w:footnoteReference w:id="1"/></w:r>'))
    linked = document.add_paragraph(LINKED[0] + " ")
    link = OxmlElement("w:hyperlink")
    link.set(qn("r:id"), document.part.relate_to(URL, RELATIONSHIP_TYPE.HYPERLINK, True))
    link.append(parse_xml(f"<w:r {nsdecls('w')}><w:t>{LINKED[1].strip()}</w:t></w:r>"))
    linked._p.append(link)
    linked.add_run(LINKED[2])
    pictured = document.add_paragraph(BEFORE + " ")
    pictured.add_run().add_picture(io.BytesIO(png()))
    pictured.add_run(" " + AFTER)
    for item in ITEMS:
        document.add_paragraph(item, style="List Bullet")
    table = document.add_table(rows=2, cols=2)
    for cell, text in zip(table._cells, CELLS, strict=True):
        cell.text = text
    document.sections[0].header.paragraphs[0].text = HEADER
    document.sections[0].footer.paragraphs[0].text = FOOTER
    out = io.BytesIO()
    document.save(out)
    return members_with(add_footnote(out.getvalue()), "word/footnotes.xml", FOOTNOTES)  # python-docx has none


def make_pptx() -> bytes:
    from pptx.util import Inches

    deck = pptx.Presentation()
    deck.core_properties.title = TITLE
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = HEADING
    frame = slide.placeholders[1].text_frame
    frame.text = ITEMS[0]
    frame.add_paragraph().text = ITEMS[1]
    paragraph = frame.add_paragraph()
    paragraph.level = 1
    for text, bold in ((BOLD[0] + " ", None), (BOLD[1].strip(), True), (" " + BOLD[2], None)):
        run = paragraph.add_run()
        run.text, run.font.bold = text, bold
    paragraph = frame.add_paragraph()
    for text, url in ((LINKED[0] + " ", None), (LINKED[1].strip(), URL), (LINKED[2], None)):
        run = paragraph.add_run()
        run.text = text
        if url:
            run.hyperlink.address = url
    table = slide.shapes.add_table(2, 2, Inches(1), Inches(5), Inches(8), Inches(1)).table
    for cell, text in zip((table.cell(row, column) for row in (0, 1) for column in (0, 1)), CELLS, strict=True):
        cell.text = text
    slide.shapes.add_picture(io.BytesIO(png()), Inches(9), Inches(1))
    slide.notes_slide.notes_text_frame.text = NOTES
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def odf_sentences(bold: object) -> object:
    """One paragraph: "neon green and orange uniform" in bold inside the first sentence, a link inside the second."""
    from odf.text import A as Link
    from odf.text import P, Span

    paragraph = P(text=BOLD[0] + " ")
    paragraph.addElement(Span(stylename=bold, text=BOLD[1].strip()))
    paragraph.addText(f" {BOLD[2]} {LINKED[0]} ")
    paragraph.addElement(Link(href=URL, text=LINKED[1].strip()))
    paragraph.addText(LINKED[2])
    return paragraph


def odf_list_table_image(document: object, into: object) -> None:
    from odf.draw import Frame, Image
    from odf.table import Table, TableCell, TableColumn, TableRow
    from odf.text import List, ListItem, P

    items = List()
    for text in ITEMS:
        item = ListItem()
        item.addElement(P(text=text))
        items.addElement(item)
    into.addElement(items)
    pictured = P(text=BEFORE + " ")
    frame = Frame(width="1cm", height="1cm", anchortype="as-char")
    frame.addElement(Image(href=document.addPicture("Pictures/dot.png", "image/png", png())))
    pictured.addElement(frame)
    pictured.addText(" " + AFTER)
    into.addElement(pictured)
    table = Table(name="Table1")
    table.addElement(TableColumn(numbercolumnsrepeated=2))
    for cells in (CELLS[:2], CELLS[2:]):
        row = TableRow()
        for text in cells:
            cell = TableCell()
            cell.addElement(P(text=text))
            row.addElement(cell)
        table.addElement(row)
    into.addElement(table)


def make_odt() -> bytes:
    from odf import dc
    from odf.opendocument import OpenDocumentText
    from odf.style import Footer, Header, MasterPage, PageLayout
    from odf.text import H, Note, NoteBody, NoteCitation, P

    document = OpenDocumentText()
    document.meta.addElement(dc.Title(text=TITLE))
    bold = odf_styles(document)
    layout = PageLayout(name="Layout")
    document.automaticstyles.addElement(layout)
    master = MasterPage(name="Standard", pagelayoutname=layout)
    for part, text in ((Header(), HEADER), (Footer(), FOOTER)):
        part.addElement(P(text=text))
        master.addElement(part)
    document.masterstyles.addElement(master)
    document.text.addElement(H(outlinelevel=1, text=HEADING))
    paragraph = odf_sentences(bold)
    note = Note(id="ftn1", noteclass="footnote")
    note.addElement(NoteCitation(text="1"))
    body = NoteBody()
    body.addElement(P(text=NOTE))
    note.addElement(body)
    paragraph.addElement(note)
    document.text.addElement(paragraph)
    odf_list_table_image(document, document.text)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def make_odp() -> bytes:
    from odf import dc
    from odf.draw import Frame, TextBox
    from odf.opendocument import OpenDocumentPresentation
    from odf.presentation import Notes
    from odf.text import P

    document = OpenDocumentPresentation()
    document.meta.addElement(dc.Title(text=TITLE))
    bold = odf_styles(document)
    page = odp_page(document)

    def box(into: object) -> TextBox:
        frame, text = Frame(width="20cm", height="5cm", x="1cm", y="1cm"), TextBox()
        frame.addElement(text)
        into.addElement(frame)
        return text

    slide = box(page)
    slide.addElement(P(text=HEADING))
    slide.addElement(odf_sentences(bold))
    odf_list_table_image(document, slide)
    notes = Notes()
    page.addElement(notes)
    box(notes).addElement(P(text=NOTES))
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


CHAPTER = (
    f"<h1>{HEADING}</h1><p>{BOLD[0]} <b>{BOLD[1].strip()}</b> {BOLD[2]}"
    '<a epub:type="noteref" href="#note1">*</a></p>'
    f"<p>{LINKED[0]} <a href='{URL}'>{LINKED[1].strip()}</a>{LINKED[2]}</p>"
    f"<p>{BEFORE} <img src='images/dot.png' alt='dot'/> {AFTER}</p><ul><li>{ITEMS[0]}</li><li>{ITEMS[1]}</li></ul>"
    f"<table><tr><td>{CELLS[0]}</td><td>{CELLS[1]}</td></tr><tr><td>{CELLS[2]}</td><td>{CELLS[3]}</td></tr></table>"
    f'<aside epub:type="footnote" id="note1"><p>{NOTE}</p></aside>'
)


def make_epub(folder: Path) -> bytes:
    book = epub.EpubBook()
    book.set_identifier("id-1")
    book.set_title(TITLE)
    book.set_language("en")
    chapter = epub.EpubHtml(title=HEADING, file_name="chapter1.xhtml", lang="en")
    chapter.content = CHAPTER
    book.add_item(chapter)
    book.add_item(epub.EpubItem(uid="dot", file_name="images/dot.png", media_type="image/png", content=png()))
    book.toc = [epub.Link("chapter1.xhtml", HEADING, "chapter1")]
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", chapter]
    path = folder / "made.epub"
    epub.write_epub(str(path), book, {"epub3_pages": False})  # else EbookLib lists the footnote as a page
    return path.read_bytes()


def make_srt() -> bytes:
    """A sentence over two cues, a cue in italics, a dialogue cue."""
    words = LINES[13].split()
    cues = [" ".join(words[:7]), " ".join(words[7:]), f"<i>{BEFORE}</i>", f"- {ITEMS[0]}\n- {ITEMS[1]}"]
    return "".join(f"{i}\n00:00:0{i},000 --> 00:00:0{i},900\n{text}\n\n" for i, text in enumerate(cues, 1)).encode()


def make_vtt() -> bytes:
    words = LINES[13].split()
    return (
        "WEBVTT - made by the tests\n\nNOTE kept as it is\n\nSTYLE\n::cue { color: lime }\n\n"
        f"intro\n00:01.000 --> 00:02.500 align:start line:0%\n<v Bob>{' '.join(words[:7])}\n\n"
        f"00:00:02.500 --> 00:00:04.000\n{' '.join(words[7:])}\n\n"
        f"00:04.000 --> 00:06.000\n<i>{AFTER}</i>\n"
    ).encode()


# each format read back: its text nodes with words, and everything else


Read = tuple[list[str], Any]  # (text nodes with words, in document order; the rest of the document)


def read_txt(data: bytes) -> Read:
    lines = data.decode().split("\n")
    return [line for line in lines if wordy(line)], [
        line[: len(line) - len(line.lstrip())] if wordy(line) else line for line in lines
    ]


class _Html(HTMLParser):
    def __init__(self, document: str) -> None:
        super().__init__(convert_charrefs=True)
        self.texts: list[str] = []
        self.events: list[tuple] = []
        self.feed(document)
        self.close()

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.events.append(("start", tag, attrs))

    def handle_endtag(self, tag: str) -> None:
        self.events.append(("end", tag))

    def handle_decl(self, decl: str) -> None:
        self.events.append(("decl", decl))

    def handle_data(self, data: str) -> None:
        if wordy(data):
            self.texts.append(data)
            self.events.append(("text",))
        else:
            self.events.append(("space", data))


def read_html(data: bytes) -> Read:
    parsed = _Html(data.decode())
    return parsed.texts, parsed.events


def read_md(data: bytes) -> Read:
    """markdown-it's tokens: every text child with words (an image's alt text is no text node: it is kept), and
    every token's kind, tag, attributes and markup, and every other inline child's content."""
    md = markdown_it.MarkdownIt("commonmark").enable(["table", "strikethrough"])
    texts, shape = [], []
    for token in md.parse(data.decode()):
        shape.append((token.type, token.tag, token.nesting, token.markup, sorted(token.attrs.items())))
        for child in token.children or []:
            kept = child.content  # an image's alt text, code, raw HTML, punctuation between tags
            if child.type == "text" and wordy(child.content):
                texts.append(child.content)
                kept = "text"
            shape.append((child.type, child.tag, child.markup, sorted(child.attrs.items()), kept))
    return texts, shape


_SUBTITLE_TAG = re.compile(r"<[^>]*>|\{\\[^}]*\}")


def read_subtitles(data: bytes) -> Read:
    """Each cue's text without its tags; the header, NOTE and STYLE blocks, identifiers and timing lines as written,
    and each cue's tags and dialogue dashes."""
    texts, shape = [], []
    for block in re.split(r"\n{2,}", data.decode().strip("\n")):
        lines = block.split("\n")
        at = next((i for i, line in enumerate(lines) if "-->" in line), None)
        if at is None:
            shape.append(block)
            continue
        cue = lines[at + 1 :]
        texts.append(_SUBTITLE_TAG.sub("", " ".join(cue)))
        dashes = sum(line.startswith("- ") for line in cue)
        shape.append((lines[: at + 1], _SUBTITLE_TAG.findall(" ".join(cue)), dashes))
    return texts, shape


def read_zip(data: bytes, parts: set[str], wanted: Callable[[etree._Element], bool]) -> Read:
    """The text nodes `wanted` says are the document's, in the parts that hold text; the member list, every other
    member's bytes and the parts' element trees without their text."""
    content = members(data)
    texts = [text for name in sorted(parts) for _, _, text in text_nodes(content[name], wanted) if wordy(text)]
    return texts, (
        list(content),
        {name: skeleton(value) if name in parts else value for name, value in content.items()},
    )


def read_docx(data: bytes) -> Read:
    document = docx.Document(io.BytesIO(data))
    opened = (
        [(paragraph.style.name, [run.bold for run in paragraph.runs]) for paragraph in document.paragraphs],
        [link.address for paragraph in document.paragraphs for link in paragraph.hyperlinks],
        [(shape.type, shape.width, shape.height) for shape in document.inline_shapes],
        [(len(table.rows), len(table.columns)) for table in document.tables],
        [len(section.header.paragraphs) + len(section.footer.paragraphs) for section in document.sections],
    )
    texts, shape = read_zip(data, TEXT_PARTS["docx"], lambda element: element.tag in (W + "t", DC_TITLE))
    return texts, (opened, shape)


def read_pptx(data: bytes) -> Read:
    deck = pptx.Presentation(io.BytesIO(data))
    opened = [
        [
            (
                shape.shape_type,
                shape.name,
                shape.has_text_frame
                and [
                    (paragraph.level, [(run.font.bold, run.hyperlink.address) for run in paragraph.runs])
                    for paragraph in shape.text_frame.paragraphs
                ],
            )
            for shape in slide.shapes
        ]
        + [slide.has_notes_slide]
        for slide in deck.slides
    ]
    texts, shape = read_zip(data, TEXT_PARTS["pptx"], in_run)
    return texts, (opened, shape)


def read_odf(kind: str) -> Callable[[bytes], Read]:
    def read(data: bytes) -> Read:
        from odf.draw import Image
        from odf.opendocument import load
        from odf.table import TableCell
        from odf.text import A as Link
        from odf.text import ListItem, Note, Span

        document = load(io.BytesIO(data))
        opened = (
            [span.getAttribute("stylename") for span in document.getElementsByType(Span)],
            [link.getAttribute("href") for link in document.getElementsByType(Link)],
            [image.getAttribute("href") for image in document.getElementsByType(Image)],
            [len(document.getElementsByType(element)) for element in (TableCell, ListItem, Note)],
        )
        texts, shape = read_zip(data, TEXT_PARTS[kind], in_paragraph)
        return texts, (opened, shape)

    return read


def in_epub_text(element: etree._Element) -> bool:
    """An XHTML body's text (not the head's), an NCX label or the title."""
    if element.tag in (DC_TITLE, NCX_TEXT, XHTML + "body"):
        return True
    return any(ancestor.tag == XHTML + "body" for ancestor in element.iterancestors())


def read_epub(data: bytes, folder: Path) -> Read:
    path = folder / "read.epub"
    path.write_bytes(data)
    book = epub.read_epub(str(path))
    opened = (
        [(item.file_name, item.media_type) for item in book.get_items()],
        book.spine,
        book.get_item_with_href("images/dot.png").get_content(),
    )
    texts, shape = read_zip(data, TEXT_PARTS["epub"], in_epub_text)
    return texts, (opened, shape)


# one translate_documents call for all ten


@pytest.fixture(scope="module")
def round_trips(overfit_run: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[bytes, bytes]]:
    """Each format's (source, translation), all ten translated in one call: their sentences batched together."""
    folder = tmp_path_factory.mktemp("round-trip")
    made = {
        "txt": make_txt(),
        "html": make_html(),
        "md": make_md(),
        "docx": make_docx(),
        "pptx": make_pptx(),
        "odt": make_odt(),
        "odp": make_odp(),
        "epub": make_epub(folder),
        "srt": make_srt(),
        "vtt": make_vtt(),
    }
    sources, outputs = [folder / f"doc.{kind}" for kind in FORMATS], [folder / f"doc.de.{kind}" for kind in FORMATS]
    for kind, source in zip(FORMATS, sources):
        source.write_bytes(made[kind])
    summary = translate_documents(load_translator(overfit_run), sources, outputs)
    assert [document["format"] for document in summary["documents"]] == list(FORMATS)
    return {kind: (made[kind], out.read_bytes()) for kind, out in zip(FORMATS, outputs)}


@pytest.fixture(scope="module")
def detector() -> LanguageDetector:
    return LanguageDetector(["en", "de"])


def english(detector: LanguageDetector, texts: list[str]) -> list[str]:
    """The texts the detector reads as English (a text without letters has no language)."""
    lettered = [text for text in texts if any(char.isalpha() for char in text)]
    return [text for text, found in zip(lettered, detector.detect(lettered)) if found[0].language == "en"]


@pytest.mark.parametrize("kind", FORMATS)
def test_round_trip_translates_every_text_node_and_keeps_the_rest(
    kind: str, round_trips: dict[str, tuple[bytes, bytes]], detector: LanguageDetector, tmp_path: Path
) -> None:
    readers: dict[str, Callable[[bytes], Read]] = {
        "txt": read_txt,
        "html": read_html,
        "md": read_md,
        "docx": read_docx,
        "pptx": read_pptx,
        "odt": read_odf("odt"),
        "odp": read_odf("odp"),
        "epub": lambda data: read_epub(data, tmp_path),
        "srt": read_subtitles,
        "vtt": read_subtitles,
    }
    source, out = round_trips[kind]
    (texts, shape), (translated, translated_shape) = readers[kind](source), readers[kind](out)
    assert len(english(detector, texts)) == len(texts), f"{kind}: the detector does not see the source as English"
    left = english(detector, translated)
    assert not left, f"{kind}: {len(left)} of {len(translated)} text nodes still English: {left}"
    assert len(translated) == len(texts), f"{kind}: {len(translated)} text nodes, the source had {len(texts)}"
    assert translated_shape == shape, f"{kind}: what is not text changed"
    if kind in TEXT_PARTS:
        before, after = members(source), members(out)
        assert {name for name in before if before[name] != after[name]} == TEXT_PARTS[kind]
    if kind in ("odt", "odp", "epub"):
        with zipfile.ZipFile(io.BytesIO(out)) as archive:
            first = archive.infolist()[0]
            assert (first.filename, first.compress_type) == ("mimetype", zipfile.ZIP_STORED)
