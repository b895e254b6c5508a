"""mtkit.documents.markdown: Markdown translated by stand-in translators (identity, upper case, a dictionary, a
recorder); markup, code, front matter and URLs come back byte for byte, sentences go whole across inline markup."""

from __future__ import annotations

import pytest
from markdown_it import MarkdownIt

from mtkit.documents.job import DocumentError, run_jobs
from mtkit.documents.markdown import front_matter, markdown_job
from tests.documents.stand_ins import Recorder, upper

DOCUMENT = """---
title: Keep *me* as written
---
# The *big* title ##

Some text with **bold words** and a [link to docs](https://example.com/a_b "Title") here. Call `make test` now.

> A quote that is *quoted*.
>
> Hard break next<2SP>
> after it.\\
> And more.

- item one, with <span>raw html</span> in it.
- item two ![alt text](img.png) end.
   1. nested *item* and __strong__ and ~~gone~~ and _em_ text.

```python
x = "do not translate"
```

    indented code stays

| Head one | Head two |
|---|---|
| cell *a* | cell b |

<p align="center">An HTML block.</p>

[ref]: https://example.com/ref

See [the ref][ref] and <https://auto.link/x>.

Setext heading
==============
""".replace("<2SP>", "  ")  # a hard break: two spaces at the line's end
KEPT = [
    "---\ntitle: Keep *me* as written\n---\n",
    '](https://example.com/a_b "Title")',
    "`make test`",
    '```python\nx = "do not translate"\n```\n',
    "    indented code stays\n",
    "![alt text](img.png)",
    "[ref]: https://example.com/ref\n",
    "][ref]",
    "<https://auto.link/x>",
    "|---|---|\n",
]


def translate(document: str, translator, name: str = "doc.md") -> str:
    return run_jobs([markdown_job(document.encode(), name, "en")], translator)[0].decode()


@pytest.mark.parametrize("eol", ["\n", "\r\n"])
def test_identity_gives_the_document_back_byte_for_byte(eol: str) -> None:
    document = DOCUMENT.replace("\n", eol)
    assert translate(document, lambda texts: texts) == document


def test_upper_case_changes_only_the_text() -> None:
    out = translate(DOCUMENT, upper)
    for kept in KEPT:
        assert kept in out, kept
    assert out.lower() == DOCUMENT.lower()  # markup, white space, line breaks: all as written
    assert "# THE *BIG* TITLE ##\n" in out and "   1. NESTED *ITEM* AND __STRONG__ AND ~~GONE~~ AND _EM_ TEXT." in out
    assert '<p align="center">AN HTML BLOCK.</p>' in out and "| CELL *A* | CELL B |" in out


def test_sentences_are_asked_whole_and_code_never() -> None:
    recorder = Recorder()
    translate(DOCUMENT, recorder)
    asked = recorder.asked
    assert "Some text with bold words and a link to docs here." in asked  # across strong and link
    assert "nested item and strong and gone and em text." in asked
    assert "See the ref and" in asked  # an autolink is kept, as code is: it cuts the sentence
    assert len(asked) == len(set(asked))  # each once
    for never in ("make test", "do not translate", "indented", "https", "img.png", "Keep", "alt text", "ref]"):
        assert not any(never in text for text in asked), never


def test_a_wrapped_paragraph_is_one_text_and_comes_back_on_one_line() -> None:
    document = "- A man in a blue shirt\n  is standing on a ladder.  \n  He cleans\n  windows.\n\nNext.\n"
    recorder = Recorder()
    out = translate(document, recorder)
    assert recorder.asked == ["A man in a blue shirt is standing on a ladder.", "He cleans windows.", "Next."]
    assert out == "- A MAN IN A BLUE SHIRT IS STANDING ON A LADDER.  \n  HE CLEANS WINDOWS.\n\nNEXT.\n"


def test_markup_in_a_translation_is_escaped() -> None:
    document = "Hello there.\n\n| a | b |\n|---|---|\n| one | two |\n\nSee *this*.\n"
    table = {"Hello there.": "1. Hallo *da* [x]", "one": "eins | zwei", "See this.": "Sieh dies.", "this": "dies"}
    out = translate(document, lambda texts: [table.get(text, text) for text in texts])
    tokens = MarkdownIt("commonmark").enable("table").parse(out)
    kinds = [token.type for token in tokens]
    assert "ordered_list_open" not in kinds and kinds.count("td_open") == 2  # no list made, no cell added
    first = next(token for token in tokens if token.type == "inline")
    assert [child.type for child in first.children or []] == ["text"]  # no emphasis, no link
    assert first.content.replace("\\", "") == "1. Hallo *da* [x]"
    assert "Sieh *dies*." in out


def test_delimiters_and_link_targets_follow_their_words_when_they_move() -> None:
    german = {
        "The big dog runs to me.": "Zu mir rennt der große Hund.",
        "big": "große",
        "to me": "Zu mir",
    }
    out = translate('The **big** dog runs [to me](http://x.org/a_b "T").\n', lambda texts: [german[t] for t in texts])
    assert out == '[Zu mir](http://x.org/a_b "T") rennt der **große** Hund.\n'


def test_white_space_around_code_spans_stays_as_written() -> None:
    """A code span cuts its sentence (the model never sees it); where the piece after it began with punctuation
    glued to it ("`Applications`, then") and the translation does not, a space keeps the word off the code span,
    as the source had one after the punctuation ("`Applications`Sie" was the result). Glued words stay glued."""
    german = {
        "Drag the app to": "Ziehen Sie die App nach",
        ", then open it.": "Sie dann es öffnen.",
        "it": "es öffnen",
        "Run": "Führe",
        "s twice (": "zweimal aus",
    }
    document = "Drag the app to `Applications`, then open *it*.\n\nRun `make`s twice (`ls`).\n"
    out = translate(document, lambda texts: [german.get(t, t) for t in texts])
    assert out == "Ziehen Sie die App nach `Applications` Sie dann *es öffnen*.\n\nFühre `make`zweimal aus `ls`).\n"
    assert "`Applications`Sie" not in out
    assert translate(document, upper) == document.replace("Drag the app to", "DRAG THE APP TO").replace(
        ", then open *it*.", ", THEN OPEN *IT*."
    ).replace("Run", "RUN").replace("s twice (", "S TWICE (")


def test_html_block_inside_a_quote_and_no_text_blocks_are_kept() -> None:
    document = "> <div>\n> inside a quote\n> </div>\n\n***\n\n\\*\\*\\*\n"
    assert translate(document, upper) == document


def test_front_matter() -> None:
    assert front_matter("+++\ntitle = 'x'\n+++\nText.\n") == "+++\ntitle = 'x'\n+++\n"
    assert front_matter("---\na: 1\n...\nText.\n") == "---\na: 1\n...\n"
    assert front_matter("---\nno end\n") == ""
    assert front_matter("Text\n---\n") == ""
    out = translate("+++\ntitle = 'Hello there'\n+++\nHello there.\n", upper)
    assert out == "+++\ntitle = 'Hello there'\n+++\nHELLO THERE.\n"


def test_bad_bytes_are_refused_with_the_file_name() -> None:
    with pytest.raises(DocumentError, match=r"notes.md: not UTF-8 text \(byte 0xe9 at offset 5\)"):
        markdown_job("# Caf\u00e9".encode("cp1252"), "notes.md", "en")


def test_a_link_whose_translation_is_one_word_stays_around_the_whole_word() -> None:
    """A tag placed by share in a translation of one word goes at the word's edge, not between its letters."""
    out = translate("`x`, [see `q`](v) now\n", lambda texts: ["SIEHE" if t == ", see" else t.upper() for t in texts])
    assert out == "`x` [SIEHE `q`](v) NOW\n"  # it was "`x` S[IEHE `q`](v) NOW\n"
