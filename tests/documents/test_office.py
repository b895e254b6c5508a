"""docx, pptx, odt and odp translated by stand-in translators (upper-casing, a marker, a recorder): each test
document is made by its own library (python-docx, python-pptx, odfpy) with a table, a list, an image, bold inside a
sentence and a link, a header and footer and a footnote where the format has them, and the output is read back by
that library. Every text node is translated, the formatting stays around the translated words, untouched members
are byte-identical and the XML's structure without its text is the one written."""

from __future__ import annotations

import io
import re
import struct
import zipfile
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from lxml import etree

from mtkit.documents.format_runs import TEXT, XML_SPACE, A, W
from mtkit.documents.job import DocumentError, Job, run_jobs
from mtkit.documents.office import docx_job, odp_job, odt_job, pptx_job
from mtkit.documents.safety import Limits
from mtkit.text.sentences import wordy

docx = pytest.importorskip("docx")
pptx = pytest.importorskip("pptx")
odf = pytest.importorskip("odf")

LIMITS = Limits()
DC_TITLE = "{http://purl.org/dc/elements/1.1/}title"


def png() -> bytes:
    """A 1x1 green PNG, made here."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\x00\x00\xff\x00"))
        + chunk(b"IEND", b"")
    )


def upper(texts: list[str]) -> list[str]:
    return [text.upper() for text in texts]


def marker(texts: list[str]) -> list[str]:
    return ["[de] " + text for text in texts]


class Recorder:
    """Every text it was asked, and the marker's answer."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, texts: list[str]) -> list[str]:
        self.asked += texts
        return marker(texts)


def members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def skeleton(xml: bytes) -> list[tuple[str, list[tuple[str, str]]]]:
    """The element tree without its text: tags and attributes in document order (xml:space aside)."""
    root = etree.fromstring(xml)
    return [(str(el.tag), sorted((k, v) for k, v in el.attrib.items() if k != XML_SPACE)) for el in root.iter()]


def text_nodes(xml: bytes, wanted: Callable[[etree._Element], bool]) -> Iterator[tuple[etree._Element, str, str]]:
    """(element, "text" or "tail", text) of every text node `wanted` says is the document's text."""
    for element in etree.fromstring(xml).iter():
        for where in ("text", "tail"):
            owner = element if where == "text" else element.getparent()
            text = getattr(element, where)
            if text and owner is not None and wanted(owner):
                yield element, where, text


def check_translated(
    source: bytes, translated: bytes, changed: set[str], wanted: Callable[[etree._Element], bool]
) -> None:
    """Untouched members identical; in the changed ones the same structure, and (upper-casing) each text node of
    the document's text its source's in capitals, none left as it was."""
    before, after = members(source), members(translated)
    assert list(after) == list(before)
    assert {name for name in before if before[name] != after[name]} == changed
    for name in changed:
        assert skeleton(after[name]) == skeleton(before[name]), name
        pairs = list(zip(text_nodes(before[name], wanted), text_nodes(after[name], wanted)))
        assert pairs, name
        for (_, _, old), (_, _, new) in pairs:
            if wordy(old):
                assert new == old.upper() and new != old, (name, old, new)


# docx


def make_docx() -> bytes:
    from docx.opc.constants import RELATIONSHIP_TYPE
    from docx.oxml import parse_xml
    from docx.oxml.ns import nsdecls, qn
    from docx.oxml.parser import OxmlElement

    document = docx.Document()
    document.core_properties.title = "The report title"
    document.add_heading("A short report", level=1)
    paragraph = document.add_paragraph("The quick fox is ")
    paragraph.add_run("very").bold = True
    paragraph.add_run(" fast today. It runs home.")
    paragraph._p.append(parse_xml(f'<w:r {nsdecls("w")}><w:footnoteReference w:id="1"/></w:r>'))
    linked = document.add_paragraph("Read ")
    link = OxmlElement("w:hyperlink")
    link.set(qn("r:id"), document.part.relate_to("https://example.com/", RELATIONSHIP_TYPE.HYPERLINK, True))
    link.append(parse_xml(f"<w:r {nsdecls('w')}><w:t>the manual page</w:t></w:r>"))
    linked._p.append(link)
    linked.add_run(" before you start.")
    pictured = document.add_paragraph("Before the image ")
    pictured.add_run().add_picture(io.BytesIO(png()))
    pictured.add_run(" after the image.")
    document.add_paragraph("First item of the list", style="List Bullet")
    document.add_paragraph("Second item of the list", style="List Bullet")
    table = document.add_table(rows=1, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Left cell", "Right cell"
    document.sections[0].header.paragraphs[0].text = "Header text here"
    document.sections[0].footer.paragraphs[0].text = "Footer text here"
    out = io.BytesIO()
    document.save(out)
    return add_footnote(out.getvalue())


FOOTNOTES = (
    b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    b'<w:footnotes xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
    b'<w:footnote w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:footnote>'
    b'<w:footnote w:id="1"><w:p><w:r><w:footnoteRef/></w:r><w:r><w:t xml:space="preserve"> A note about the </w:t>'
    b'</w:r><w:r><w:rPr><w:i/></w:rPr><w:t>quick</w:t></w:r><w:r><w:t xml:space="preserve"> fox.</w:t></w:r>'
    b"</w:p></w:footnote></w:footnotes>"
)


def add_footnote(data: bytes) -> bytes:
    """python-docx cannot make footnotes: the part, its relationship and its content type added to the zip."""
    source = members(data)
    source["word/footnotes.xml"] = FOOTNOTES
    rel = (
        '<Relationship Id="rIdNotes" Target="footnotes.xml" '
        'Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/footnotes"/></Relationships>'
    )
    source["word/_rels/document.xml.rels"] = source["word/_rels/document.xml.rels"].replace(
        b"</Relationships>", rel.encode()
    )
    kind = '<Override PartName="/word/footnotes.xml" ContentType="application/vnd.openxmlformats-officedocument'
    kind += '.wordprocessingml.footnotes+xml"/></Types>'
    source["[Content_Types].xml"] = source["[Content_Types].xml"].replace(b"</Types>", kind.encode())
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in source.items():
            archive.writestr(name, content)
    return out.getvalue()


def finish(job: Job, translate: Callable[[list[str]], list[str]]) -> bytes:
    return run_jobs([job], translate)[0]


def test_docx_every_text_translated_formatting_and_members_kept() -> None:
    source = make_docx()
    out = finish(docx_job(source, "report.docx", "en", LIMITS), upper)
    parts = {"word/document.xml", "word/header1.xml", "word/footer1.xml", "word/footnotes.xml", "docProps/core.xml"}
    check_translated(source, out, parts, lambda el: el.tag in (W + "t", DC_TITLE))
    document = docx.Document(io.BytesIO(out))
    assert document.core_properties.title == "THE REPORT TITLE"
    runs = document.paragraphs[1].runs
    assert [(run.text, run.bold) for run in runs] == [
        ("THE QUICK FOX IS ", None),
        ("VERY", True),
        (" FAST TODAY. IT RUNS HOME.", None),
        ("", None),
    ]
    link = document.paragraphs[2].hyperlinks[0]
    assert (link.text, link.address) == ("THE MANUAL PAGE", "https://example.com/")
    assert document.tables[0].cell(0, 1).text == "RIGHT CELL"
    assert document.sections[0].header.paragraphs[0].text == "HEADER TEXT HERE"
    assert document.paragraphs[4].style.name == "List Bullet"
    assert len(document.inline_shapes) == 1
    notes = etree.fromstring(members(out)["word/footnotes.xml"])
    assert "".join(notes.itertext()) == " A NOTE ABOUT THE QUICK FOX."
    assert notes.find(f".//{W}i/../../{W}t").text == "QUICK"  # the italic run still italic, around its word


def test_docx_sentences_spanning_runs_are_asked_whole() -> None:
    recorder = Recorder()
    out = finish(docx_job(make_docx(), "report.docx", "en", LIMITS), recorder)
    assert "The quick fox is very fast today." in recorder.asked
    assert "Read the manual page before you start." in recorder.asked
    assert "A note about the quick fox." in recorder.asked
    assert not any(text in recorder.asked for text in ("The quick fox is", "fast today.", "Read"))
    document = docx.Document(io.BytesIO(out))
    for paragraph in document.paragraphs:
        assert not wordy(paragraph.text) or paragraph.text.startswith("[de] "), paragraph.text
    bold = [run for run in document.paragraphs[1].runs if run.bold]
    assert len(bold) == 1 and bold[0].text.strip()  # the bold run kept, once, with words in it
    assert document.paragraphs[2].hyperlinks[0].text.strip()


def test_docx_leading_and_trailing_spaces_are_preserved_in_xml() -> None:
    out = finish(docx_job(make_docx(), "report.docx", "en", LIMITS), upper)
    body = etree.fromstring(members(out)["word/document.xml"])
    for text in body.iter(W + "t"):
        if text.text and text.text != text.text.strip():
            assert text.get(XML_SPACE) == "preserve", text.text


def test_docx_refuses_xml_with_entities() -> None:
    source = members(make_docx())
    source["word/document.xml"] = b'<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><x>&e;</x>'
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, content in source.items():
            archive.writestr(name, content)
    with pytest.raises(DocumentError, match=r"^report\.docx: word/document\.xml: .*entities"):
        docx_job(out.getvalue(), "report.docx", "en", LIMITS)


# pptx


def make_pptx() -> bytes:
    from pptx.util import Inches

    deck = pptx.Presentation()
    deck.core_properties.title = "The talk title"
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "A short talk"
    frame = slide.placeholders[1].text_frame
    frame.text = "First point of the list"
    paragraph = frame.add_paragraph()
    paragraph.level = 1
    for text, bold in (("The quick fox is ", False), ("very", True), (" fast today.", False)):
        run = paragraph.add_run()
        run.text, run.font.bold = text, bold or None
    paragraph = frame.add_paragraph()
    for text, url in (("Read ", None), ("the manual page", "https://example.com/"), (" before you start.", None)):
        run = paragraph.add_run()
        run.text = text
        if url:
            run.hyperlink.address = url
    table = slide.shapes.add_table(1, 2, Inches(1), Inches(5), Inches(4), Inches(1)).table
    table.cell(0, 0).text, table.cell(0, 1).text = "Left cell", "Right cell"
    slide.shapes.add_picture(io.BytesIO(png()), Inches(6), Inches(1))
    slide.notes_slide.notes_text_frame.text = "Speaker notes are here."
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def in_run(element: etree._Element) -> bool:
    return element.tag == DC_TITLE or element.tag == A + "t" and element.getparent().tag == A + "r"


def test_pptx_every_text_translated_formatting_and_members_kept() -> None:
    source = make_pptx()
    out = finish(pptx_job(source, "talk.pptx", "en", LIMITS), upper)
    parts = {"ppt/slides/slide1.xml", "ppt/notesSlides/notesSlide1.xml", "docProps/core.xml"}
    check_translated(source, out, parts, in_run)
    deck = pptx.Presentation(io.BytesIO(out))
    slide = deck.slides[0]
    assert slide.shapes.title.text == "A SHORT TALK"
    paragraphs = slide.placeholders[1].text_frame.paragraphs
    assert [(run.text, run.font.bold) for run in paragraphs[1].runs] == [
        ("THE QUICK FOX IS ", None),
        ("VERY", True),
        (" FAST TODAY.", None),
    ]
    assert paragraphs[1].level == 1
    link = paragraphs[2].runs[1]
    assert (link.text, link.hyperlink.address) == ("THE MANUAL PAGE", "https://example.com/")
    table = next(shape for shape in slide.shapes if shape.has_table).table
    assert table.cell(0, 0).text == "LEFT CELL"
    assert slide.notes_slide.notes_text_frame.text == "SPEAKER NOTES ARE HERE."
    assert deck.core_properties.title == "THE TALK TITLE"


def test_pptx_sentences_spanning_runs_are_asked_whole() -> None:
    recorder = Recorder()
    out = finish(pptx_job(make_pptx(), "talk.pptx", "en", LIMITS), recorder)
    assert {"The quick fox is very fast today.", "Read the manual page before you start."} <= set(recorder.asked)
    paragraphs = pptx.Presentation(io.BytesIO(out)).slides[0].placeholders[1].text_frame.paragraphs
    assert all(paragraph.text.startswith("[de] ") for paragraph in paragraphs)
    assert [run.font.bold for run in paragraphs[1].runs].count(True) == 1


# odt and odp


def odf_styles(document: object) -> object:
    from odf.style import Style, TextProperties

    bold = Style(name="Bold", family="text")
    bold.addElement(TextProperties(fontweight="bold"))
    document.automaticstyles.addElement(bold)
    return bold


def fox(bold: object) -> object:
    """A paragraph: the quick fox, "very" in bold inside the sentence, and a link in the next one."""
    from odf.text import A as Link
    from odf.text import P, Span

    paragraph = P(text="The quick fox is ")
    paragraph.addElement(Span(stylename=bold, text="very"))
    paragraph.addText(" fast today. Read ")
    paragraph.addElement(Link(href="https://example.com/", text="the manual page"))
    paragraph.addText(" before you start.")
    return paragraph


def make_odt() -> bytes:
    from odf import dc
    from odf.draw import Frame, Image
    from odf.opendocument import OpenDocumentText
    from odf.style import Footer, Header, MasterPage, PageLayout
    from odf.table import Table, TableCell, TableColumn, TableRow
    from odf.text import H, List, ListItem, Note, NoteBody, NoteCitation, P, S

    document = OpenDocumentText()
    document.meta.addElement(dc.Title(text="The report title"))
    bold = odf_styles(document)
    layout = PageLayout(name="Layout")
    document.automaticstyles.addElement(layout)
    master = MasterPage(name="Standard", pagelayoutname=layout)
    header, footer = Header(), Footer()
    header.addElement(P(text="Header text here"))
    footer.addElement(P(text="Footer text here"))
    master.addElement(header)
    master.addElement(footer)
    document.masterstyles.addElement(master)
    document.text.addElement(H(outlinelevel=1, text="A short report"))
    paragraph = fox(bold)
    note = Note(id="ftn1", noteclass="footnote")
    note.addElement(NoteCitation(text="1"))
    body = NoteBody()
    body.addElement(P(text="A note about the fox."))
    note.addElement(body)
    paragraph.addElement(note)
    document.text.addElement(paragraph)
    spaced = P(text="Two")
    spaced.addElement(S(c=2))
    spaced.addText("spaces here.")
    document.text.addElement(spaced)
    pictured = P(text="Before the image ")
    frame = Frame(width="1cm", height="1cm", anchortype="as-char")
    frame.addElement(Image(href=document.addPicture("Pictures/dot.png", "image/png", png())))
    pictured.addElement(frame)
    pictured.addText(" after the image.")
    document.text.addElement(pictured)
    items = List()
    for text in ("First item of the list", "Second item of the list"):
        item = ListItem()
        item.addElement(P(text=text))
        items.addElement(item)
    document.text.addElement(items)
    table = Table(name="Table1")
    table.addElement(TableColumn(numbercolumnsrepeated=2))
    row = TableRow()
    for text in ("Left cell", "Right cell"):
        cell = TableCell()
        cell.addElement(P(text=text))
        row.addElement(cell)
    table.addElement(row)
    document.text.addElement(table)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def odp_page(document: Any) -> Any:
    """A slide of a new presentation, on a master page of its own layout."""
    from odf.draw import Page
    from odf.style import MasterPage, PageLayout, PageLayoutProperties

    layout = PageLayout(name="Layout")
    layout.addElement(PageLayoutProperties(pagewidth="28cm", pageheight="21cm"))
    document.automaticstyles.addElement(layout)
    master = MasterPage(name="Default", pagelayoutname=layout)
    document.masterstyles.addElement(master)
    page = Page(masterpagename=master)
    document.presentation.addElement(page)
    return page


def make_odp() -> bytes:
    from odf.draw import Frame, Image, TextBox
    from odf.opendocument import OpenDocumentPresentation
    from odf.presentation import Notes
    from odf.text import List, ListItem, P

    document = OpenDocumentPresentation()
    bold = odf_styles(document)
    page = odp_page(document)

    def box(*paragraphs: object, into: object = page) -> None:
        frame = Frame(width="20cm", height="5cm", x="1cm", y="1cm")
        text = TextBox()
        for paragraph in paragraphs:
            text.addElement(paragraph)
        frame.addElement(text)
        into.addElement(frame)

    items = List()
    item = ListItem()
    item.addElement(P(text="First point of the list"))
    items.addElement(item)
    box(P(text="A short talk"), fox(bold), items)
    picture = Frame(width="1cm", height="1cm", x="22cm", y="1cm")
    picture.addElement(Image(href=document.addPicture("Pictures/dot.png", "image/png", png())))
    page.addElement(picture)
    notes = Notes()
    page.addElement(notes)
    box(P(text="Speaker notes are here."), into=notes)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def in_paragraph(element: etree._Element) -> bool:
    """Text of a text:p or text:h (a note's citation aside), or the title."""
    if element.tag == DC_TITLE:
        return True
    tags = [ancestor.tag for ancestor in element.iterancestors()] + [element.tag]
    return TEXT + "note-citation" not in tags and bool({TEXT + "p", TEXT + "h"} & set(tags))


@pytest.mark.parametrize("kind", ["odt", "odp"])
def test_odf_every_text_translated_formatting_and_members_kept(kind: str) -> None:
    from odf import teletype
    from odf.opendocument import load
    from odf.text import A as Link
    from odf.text import Span

    source = make_odt() if kind == "odt" else make_odp()
    job = (odt_job if kind == "odt" else odp_job)(source, f"x.{kind}", "en", LIMITS)
    out = finish(job, upper)
    changed = {"content.xml", "styles.xml", "meta.xml"} if kind == "odt" else {"content.xml"}
    # "Two<text:s/>spaces here.": one look, so its translation goes into the first text node; checked below
    spaced = re.compile(rb"<text:p>Two<text:s[^>]*/>spaces here\.</text:p>")
    before, after = members(source), members(out)
    if kind == "odt":
        assert spaced.search(before["content.xml"])
        after_spaced = re.search(rb"<text:p>([^<]*)<text:s[^>]*/>([^<]*)</text:p>", after["content.xml"])
        assert after_spaced.groups() == (b"TWO SPACES HERE.", b"")
        source = members_with(source, "content.xml", spaced.sub(b"", before["content.xml"]))
        out = members_with(
            out, "content.xml", re.sub(rb"<text:p>TWO SPACES HERE\.<text:s[^>]*/></text:p>", b"", after["content.xml"])
        )
    check_translated(source, out, changed, in_paragraph)
    document = load(io.BytesIO(out))
    assert [teletype.extractText(span) for span in document.getElementsByType(Span)] == ["VERY"]
    links = document.getElementsByType(Link)
    assert [(teletype.extractText(a), a.getAttribute("href")) for a in links] == [
        ("THE MANUAL PAGE", "https://example.com/")
    ]


def members_with(data: bytes, name: str, content: bytes) -> bytes:
    source = members(data)
    source[name] = content
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for member, value in source.items():
            archive.writestr(member, value)
    return out.getvalue()


def test_odt_sentences_spanning_runs_are_asked_whole_and_the_footnote_is_its_own() -> None:
    recorder = Recorder()
    out = finish(odt_job(make_odt(), "x.odt", "en", LIMITS), recorder)
    assert {"The quick fox is very fast today.", "Read the manual page before you start."} <= set(recorder.asked)
    assert {"A note about the fox.", "Header text here", "The report title"} <= set(recorder.asked)
    content = etree.fromstring(members(out)["content.xml"])
    citation = content.find(f".//{TEXT}note-citation")
    assert citation.text == "1"
    first = content.find(f".//{TEXT}h")
    assert "".join(first.itertext()).startswith("[de] ")


def test_mimetype_stays_first_and_stored() -> None:
    out = finish(odt_job(make_odt(), "x.odt", "en", LIMITS), upper)
    with zipfile.ZipFile(io.BytesIO(out)) as archive:
        first = archive.infolist()[0]
        assert (first.filename, first.compress_type) == ("mimetype", zipfile.ZIP_STORED)


def one_paragraph_docx(runs: list[tuple[str, bool, bool]]) -> bytes:
    """A docx of one paragraph of (text, bold, italic) runs."""
    document = docx.Document()
    paragraph = document.add_paragraph()
    for text, bold, italic in runs:
        run = paragraph.add_run(text)
        run.bold, run.italic = bold or None, italic or None
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def test_alike_runs_are_one_span_and_split_words_are_asked_whole() -> None:
    source = one_paragraph_docx(
        [("Hel", False, False), ("lo big ", False, False), ("wor", True, False), ("ld", True, False)]
    )
    recorder = Recorder()
    out = finish(docx_job(source, "x.docx", "en", LIMITS), recorder)
    assert recorder.asked == ["Hello big world", "world"]
    runs = docx.Document(io.BytesIO(out)).paragraphs[0].runs
    assert [(run.text, run.bold) for run in runs] == [
        ("[de] Hello big ", None),
        ("", None),
        ("world", True),
        ("", True),
    ]


def test_a_translation_that_swaps_formatted_words_keeps_its_reading_order() -> None:
    source = one_paragraph_docx([("big", True, False), (" and ", False, False), ("small", False, True)])
    answers = {"big and small": "klein und groß", "big": "groß", "small": "klein", "and": "und"}
    out = finish(docx_job(source, "x.docx", "en", LIMITS), lambda texts: [answers[text] for text in texts])
    paragraph = docx.Document(io.BytesIO(out)).paragraphs[0]
    assert paragraph.text == "klein und groß"  # each word once, in the translation's order
    assert len(paragraph.runs) == 3


LINKED = {  # the sentence's translation, and a translation of the link's text not found in it
    "A man walks by a silver vehicle.": "Ein Mann geht an einem silbernen Fahrzeug vorbei.",
    "a silver vehicle": "Eine Personze",
}


def linked_docx() -> bytes:
    from docx.opc.constants import RELATIONSHIP_TYPE
    from docx.oxml import parse_xml
    from docx.oxml.ns import nsdecls, qn
    from docx.oxml.parser import OxmlElement

    document = docx.Document()
    paragraph = document.add_paragraph("A man walks by ")
    link = OxmlElement("w:hyperlink")
    link.set(qn("r:id"), document.part.relate_to("https://example.com/", RELATIONSHIP_TYPE.HYPERLINK, True))
    link.append(parse_xml(f"<w:r {nsdecls('w')}><w:t>a silver vehicle</w:t></w:r>"))
    paragraph._p.append(link)
    paragraph.add_run(".")
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def linked_pptx() -> bytes:
    presentation = pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[5])
    paragraph = slide.shapes.title.text_frame.paragraphs[0]
    for text in ("A man walks by ", "a silver vehicle", "."):
        run = paragraph.add_run()
        run.text = text
    paragraph.runs[1].hyperlink.address = "https://example.com/"
    out = io.BytesIO()
    presentation.save(out)
    return out.getvalue()


def test_a_link_holding_most_of_a_sentence_keeps_only_its_own_words() -> None:
    """A link is never the paragraph's bare look: the words after it (here its full stop) stay outside it, as in
    HTML, even when the link's own translation is not found in the sentence's."""

    def translate(texts: list[str]) -> list[str]:
        return [LINKED.get(text, text.upper()) for text in texts]

    done = run_jobs([docx_job(linked_docx(), "x.docx", "en", LIMITS)], translate)[0]
    paragraph = docx.Document(io.BytesIO(done)).paragraphs[0]
    assert [run.text for run in paragraph.runs] == ["Ein Mann geht an einem ", "."]
    assert [link.text for link in paragraph.hyperlinks] == ["silbernen Fahrzeug vorbei"]
    done = run_jobs([pptx_job(linked_pptx(), "x.pptx", "en", LIMITS)], translate)[0]
    runs = pptx.Presentation(io.BytesIO(done)).slides[0].shapes.title.text_frame.paragraphs[0].runs
    assert [run.text for run in runs] == ["Ein Mann geht an einem ", "silbernen Fahrzeug vorbei", "."]
    assert runs[1].hyperlink.address == "https://example.com/" and runs[2].hyperlink.address is None


RANGES = [  # one w:p each
    '<w:r><w:t xml:space="preserve">The dog </w:t></w:r><w:commentRangeStart w:id="0"/><w:r><w:t>runs fast</w:t></w:r>'
    '<w:commentRangeEnd w:id="0"/><w:r><w:commentReference w:id="0"/></w:r>'
    '<w:r><w:t xml:space="preserve"> in the park.</w:t></w:r>',
    '<w:r><w:t xml:space="preserve">A cat sleeps on </w:t></w:r><w:bookmarkStart w:id="1" w:name="here"/>'
    '<w:r><w:t>the green grass</w:t></w:r><w:bookmarkEnd w:id="1"/><w:r><w:t xml:space="preserve"> all day</w:t></w:r>'
    '<w:permStart w:id="2" w:edGrp="everyone"/><w:r><w:t xml:space="preserve"> long.</w:t></w:r><w:permEnd w:id="2"/>',
    '<w:r><w:t xml:space="preserve">A bird sings </w:t></w:r>'
    '<w:del w:id="3" w:author="x"><w:r><w:delText>very loud</w:delText></w:r></w:del>'
    '<w:r><w:t xml:space="preserve">on page </w:t></w:r><w:r><w:fldChar w:fldCharType="begin"/></w:r>'
    '<w:r><w:instrText xml:space="preserve"> PAGE </w:instrText></w:r><w:r><w:fldChar w:fldCharType="separate"/></w:r>'
    '<w:r><w:t>seven</w:t></w:r><w:r><w:fldChar w:fldCharType="end"/></w:r>'
    '<w:r><w:t xml:space="preserve"> today.</w:t></w:r>',
]


def ranges_docx() -> bytes:
    """Alike runs on both sides of a comment's, a bookmark's and a permission's range markers; a tracked deletion and
    a field's shown text."""
    from docx.oxml import parse_xml
    from docx.oxml.ns import nsdecls

    document = docx.Document()
    body = document.element.body
    for xml in RANGES:
        body.insert(len(body) - 1, parse_xml(f"<w:p {nsdecls('w')}>{xml}</w:p>"))
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def between(paragraph: etree._Element, start: str, end: str) -> str:
    """The text of the runs between a paragraph's `start` and `end` marker elements."""
    inside, texts = False, []
    for element in paragraph.iter():
        if element.tag == W + start:
            inside = True
        elif element.tag == W + end:
            inside = False
        elif inside and element.tag == W + "t":
            texts.append(element.text or "")
    return "".join(texts)


def test_comment_bookmark_and_permission_ranges_keep_their_text_inside_them() -> None:
    """Merged with the alike runs around them, a range's words went before it and the comment pointed at nothing;
    a tracked deletion stays deleted as written, a field's code untouched."""
    german = {
        "The dog runs fast in the park.": "Der Hund rennt schnell im Park.",
        "runs fast": "rennt schnell",
        "A cat sleeps on the green grass all day long.": "Eine Katze schläft auf dem grünen Gras den ganzen Tag lang.",
        "the green grass": "dem grünen Gras",
        "long.": "lang.",
        "A bird sings on page": "Ein Vogel singt auf Seite",
        "seven": "sieben",
        "today.": "heute.",
    }
    recorder = Recorder()
    finish(docx_job(ranges_docx(), "x.docx", "en", LIMITS), recorder)
    assert "The dog runs fast in the park." in recorder.asked  # the sentence still whole across the markers
    out = finish(docx_job(ranges_docx(), "x.docx", "en", LIMITS), lambda texts: [german.get(t, t) for t in texts])
    body = etree.fromstring(members(out)["word/document.xml"])
    first, second, third = [p for p in body.iter(W + "p") if "".join(p.itertext()).strip()][:3]
    assert between(first, "commentRangeStart", "commentRangeEnd") == "rennt schnell"
    assert "".join(t.text or "" for t in first.iter(W + "t")) == "Der Hund rennt schnell im Park."
    assert between(second, "bookmarkStart", "bookmarkEnd") == "dem grünen Gras"
    assert between(second, "permStart", "permEnd") == " lang."  # its leading space as written
    assert [t.text for t in third.iter(W + "delText")] == ["very loud"]
    assert [t.text for t in third.iter(W + "instrText")] == [" PAGE "]
    assert "".join(t.text or "" for t in third.iter(W + "t")) == "Ein Vogel singt auf Seite sieben heute."
