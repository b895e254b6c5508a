"""Plain text and HTML documents as Jobs: UTF-8 decoded strictly (a BOM kept), text cut into sentences with its white
space kept byte for byte, HTML through mtkit.text.markup. Also the decoding the other text formats share. No model,
no file IO: bytes in, bytes out."""

from __future__ import annotations

import codecs

from mtkit.documents.job import DocumentError, Job
from mtkit.text.markup import HtmlTranslation
from mtkit.text.sentences import split_sentences, wordy

_UTF16 = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


def decode_text(data: bytes, name: str) -> tuple[str, str]:
    """The document's byte order mark ("" or "\\ufeff") and its text; anything but UTF-8 is a DocumentError."""
    if data.startswith(_UTF16):  # says more than "byte 0xff at offset 0"
        raise DocumentError(f"{name}: not UTF-8 text (UTF-16 byte order mark); save it as UTF-8")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DocumentError(f"{name}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") from None
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    return bom, text[len(bom) :]


def encode_text(bom: str, text: str) -> bytes:
    return (bom + text).encode("utf-8")


def one_line(translation: str) -> str:
    """A translation as one stretch of text: a line break the model put in would move every line after it."""
    return " ".join(translation.split())


def txt_job(data: bytes, name: str, language: str) -> Job:
    """A text file's sentences; every line break and space between them comes back as written. A line break ends a
    sentence (as in `mtkit translate --split-sentences`), so a paragraph hard-wrapped in mid-sentence is translated
    line by line. A sentence without letters or digits is kept as written, not sent."""
    bom, text = decode_text(data, name)
    segmented = split_sentences(text, language)
    texts = [source for source in segmented.sources if wordy(source)]

    def finish(translations: list[str]) -> bytes:
        found = iter(map(one_line, translations))
        return encode_text(bom, segmented.join([next(found) if wordy(s) else s for s in segmented.sources]))

    return Job(texts, finish, {"sentences": len(texts), "lines": text.count("\n") + bool(text)})


def html_job(data: bytes, name: str, language: str) -> Job:
    """An HTML file's sentences, across inline tags; markup, protected elements and white space between sentences
    come back as written (mtkit.text.markup)."""
    bom, text = decode_text(data, name)
    translation = HtmlTranslation(text, language, split=True)

    def finish(translations: list[str]) -> bytes:
        translation.second([one_line(t) for t in translations])
        return encode_text(bom, translation.result([]))

    counts = {"texts": len(translation.first), "sentences": translation.placements["sentences"]}
    return Job(list(translation.first), finish, counts | {"protected": translation.placements["protected"]})
