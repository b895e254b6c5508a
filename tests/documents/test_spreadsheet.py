"""mtkit.documents.spreadsheet: workbooks made by openpyxl translated by a stand-in translator: text cells (plain,
rich, with line breaks, on every sheet) translated; numbers, formulas, dates and booleans byte for byte in the
sheets' XML; styles, merged cells and the sheets' order as they were; zip bombs and mislabelled files refused."""

from __future__ import annotations

import datetime
import io
import zipfile

import pytest
from lxml import etree

from mtkit.documents.formats import detect_format, open_job
from mtkit.documents.job import DocumentError, run_jobs
from mtkit.documents.safety import Limits
from tests.documents.stand_ins import Recorder
from tests.documents.test_office import make_docx
from tests.documents.test_safety import zipped

openpyxl = pytest.importorskip("openpyxl")
S = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"


def make_xlsx() -> bytes:
    from openpyxl.cell.rich_text import CellRichText, TextBlock
    from openpyxl.cell.text import InlineFont
    from openpyxl.styles import Font

    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "Prices"
    sheet["A1"] = "Open the file. Then close it."
    sheet["A1"].font = Font(bold=True)
    sheet["B1"], sheet["C1"], sheet["D1"] = 3.14159, "=B1*2", datetime.datetime(2024, 5, 17, 13, 30)
    sheet["A2"] = CellRichText("The ", TextBlock(InlineFont(b=True), "quick"), " fox runs.")
    sheet["B2"], sheet["C2"], sheet["D2"] = True, 1234567890123, datetime.date(1999, 12, 31)
    sheet["A3"] = "Line one\nLine two"
    sheet.merge_cells("A4:B4")
    sheet["A4"] = "Merged title"
    second = book.create_sheet("Notes")
    second["A1"], second["A2"] = "Open the file. Then close it.", '=SUM(Prices!B1:B2)&" total"'
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def _not_text(data: bytes, member: str) -> list[bytes]:
    """Each cell of a sheet that holds no text (numbers, formulas, dates, booleans), as its XML."""
    root = etree.fromstring(zipfile.ZipFile(io.BytesIO(data)).read(member))
    return [etree.tostring(c) for c in root.iter(S + "c") if c.get("t") not in ("s", "inlineStr")]


def test_text_cells_are_translated_and_everything_else_kept() -> None:
    data = make_xlsx()
    recorder = Recorder()
    out = run_jobs([open_job("book.xlsx", data, "en")], recorder)[0]
    assert recorder.asked.count("Open the file.") == 1  # on two sheets, asked once
    book = openpyxl.load_workbook(io.BytesIO(out), rich_text=True)
    assert book.sheetnames == ["Prices", "Notes"]
    prices, notes = book["Prices"], book["Notes"]
    assert prices["A1"].value == "OPEN THE FILE. THEN CLOSE IT." and prices["A1"].font.bold
    assert str(prices["A2"].value) == "THE QUICK FOX RUNS." and prices["A2"].value[1].font.b
    assert prices["A3"].value == "LINE ONE\nLINE TWO"
    assert prices["A4"].value == "MERGED TITLE" and [str(r) for r in prices.merged_cells.ranges] == ["A4:B4"]
    assert (prices["B1"].value, prices["C1"].value, prices["D1"].value) == (
        3.14159,
        "=B1*2",
        datetime.datetime(2024, 5, 17, 13, 30),
    )
    assert notes["A1"].value == "OPEN THE FILE. THEN CLOSE IT." and notes["A2"].value.startswith("=SUM(")
    before, after = zipfile.ZipFile(io.BytesIO(data)), zipfile.ZipFile(io.BytesIO(out))
    assert before.namelist() == after.namelist()
    for member in before.namelist():
        if member.startswith("xl/worksheets/"):
            assert _not_text(data, member) == _not_text(out, member)  # numbers, formulas, dates byte for byte
        elif member != "xl/sharedStrings.xml":
            assert before.read(member) == after.read(member), member  # styles, workbook, relationships


def test_mislabelled_and_hostile_workbooks_are_refused() -> None:
    assert detect_format("book.xlsx", make_xlsx()) == "xlsx"
    with pytest.raises(DocumentError, match=r"^book\.xlsx: the content is a Word document \(\.docx\), not \.xlsx$"):
        detect_format("book.xlsx", make_docx())
    with pytest.raises(DocumentError, match=r"^report\.docx: the content is an Excel workbook \(\.xlsx\), not \.docx"):
        detect_format("report.docx", make_xlsx())
    bomb = zipped(
        {"[Content_Types].xml": b"<Types/>", "xl/workbook.xml": b"<w/>", "xl/sharedStrings.xml": bytes(2 << 20)}
    )
    with pytest.raises(DocumentError, match=r"^book\.xlsx: .*zip bomb"):
        open_job("book.xlsx", bomb, "en")
    with pytest.raises(DocumentError, match=r"^book\.xlsx: .*unzips to .* over the limit of 1000 bytes"):
        open_job("book.xlsx", make_xlsx(), "en", Limits(max_unzipped=1000))
