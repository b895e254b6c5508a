"""Protected text and glossaries with a real tiny model that cannot copy (the old run of tests/data, trained at
0681275: it mangles or drops every stand-in): 300 Multi30k sentences with a placeholder, URL, e-mail address or
inline code come back with it byte for byte and exactly once, sentence by sentence and one a line, through the
library and `mtkit translate`; lines in capitals are translated in sentence case on the plain path too; a glossary
goes by the model's default term method (its hints first where it was trained with them) or the one asked."""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from mtkit.corpus.term_hints import TERM_PIECES
from mtkit.engines.factory import load_translator
from mtkit.engines.options import TranslateOptions
from mtkit.engines.plans import split_options, translate_split
from mtkit.text.glossary import Glossary
from mtkit.text.protect import ProtectConfig
from tests.conftest import run_mtkit_in_process
from tests.text.test_protected_translation import spanned_sentences

OLD_RUN = Path(__file__).resolve().parents[1] / "data" / "run-0681275"


@pytest.fixture(scope="module")
def old_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("protect") / "run"
    shutil.copytree(OLD_RUN, run, ignore=shutil.ignore_patterns("expected"))
    return run


def test_300_sentences_keep_their_span_with_a_model_that_cannot_copy(old_run: Path, multi30k: Path) -> None:
    translator = load_translator(old_run)
    cases = spanned_sentences(multi30k)
    texts = [text for text, _ in cases]
    for split in (True, False):
        done = translate_split(translator, texts, split_options(translator, "en", split))
        assert [t.text.count(span) for t, (_, span) in zip(done, cases)] == [1] * 300
    raw = translate_split(
        translator, texts, dataclasses.replace(split_options(translator, "en"), protect=ProtectConfig(default=False))
    )
    assert sum(t.text.count(span) == 1 for t, (_, span) in zip(raw, cases)) < 30  # what protection is for


def test_a_glossary_is_applied_and_reported_with_a_real_model(old_run: Path) -> None:
    translator = load_translator(old_run)
    options = dataclasses.replace(split_options(translator, "en"), glossary=Glossary((("red shirt", "Rothemd"),)))
    done = translate_split(translator, ["A man in a red shirt runs.", "A MAN IN A RED SHIRT RUNS."], options)
    assert done[0].text.count("Rothemd") == 1 and done[1].text.count("ROTHEMD") == 1
    assert done[0].sentences[0].terms == [{"source": "red shirt", "target": "Rothemd", "applied": True}]


def test_mtkit_translate_keeps_spans_on_both_paths(old_run: Path, multi30k: Path, tmp_path: Path) -> None:
    cases = spanned_sentences(multi30k, 30)
    source = tmp_path / "in.en"
    source.write_text("\n".join(text for text, _ in cases) + "\n12\n42 %\n", encoding="utf-8")
    for options in ([], ["--split-sentences"]):
        result = run_mtkit_in_process("translate", old_run, "-i", source, *options)
        assert result.returncode == 0, result.stderr
        out = result.stdout.splitlines()
        assert [line.count(span) for line, (_, span) in zip(out, cases)] == [1] * 30
        assert out[-2:] == ["12", "42 %"]  # copied, never sent
    result = run_mtkit_in_process("translate", old_run, "-i", source, "--no-protect-default")
    assert sum(line.count(span) == 1 for line, (_, span) in zip(result.stdout.splitlines(), cases)) < 10


def test_mtkit_translate_takes_a_glossary_file_and_patterns(old_run: Path, tmp_path: Path) -> None:
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("red shirt\tRothemd\n", encoding="utf-8")
    lines = "A man in a red shirt runs.\nTicket ACME-12 is done.\n"
    for options in ([], ["--split-sentences"]):
        result = run_mtkit_in_process(
            "translate", old_run, "--glossary", glossary, "--protect", r"ACME-\d+", *options, stdin=lines
        )
        assert result.returncode == 0, result.stderr
        out = result.stdout.splitlines()
        assert out[0].count("Rothemd") == 1 and out[1].count("ACME-12") == 1
        # the summary counts the terms and names the method and the way each sentence's terms went
        # the default of a model without term hints: the replace way, then stand-ins
        assert re.search(
            r"glossary \(replace\): 1 of 1 terms in the output; sentences by way: (replace|placeholder) 1",
            result.stderr,
        )
    bad = tmp_path / "bad.tsv"
    bad.write_text("red shirt\tRothemd\nno tab here\n", encoding="utf-8")
    result = run_mtkit_in_process("translate", old_run, "--glossary", bad, stdin=lines)
    assert result.returncode == 2 and f"{bad}:2: expected source<TAB>target" in result.stderr
    result = run_mtkit_in_process("translate", old_run, "--protect", "(unclosed", stdin=lines)
    assert result.returncode == 2 and "protect: bad regular expression '(unclosed'" in result.stderr


def test_a_term_the_models_own_translation_holds_is_counted_as_the_models(old_run: Path, tmp_path: Path) -> None:
    line = "A man in a red shirt runs."
    plain = run_mtkit_in_process("translate", old_run, "--no-guard", stdin=line + "\n")
    word = re.search(r"\w+", plain.stdout).group(0)  # a word the model writes for this line by itself
    glossary = tmp_path / "terms.tsv"
    glossary.write_text(f"man\t{word}\n", encoding="utf-8")
    for options in (["--no-guard"], []):
        method = ("--term-method", "check-first")
        result = run_mtkit_in_process(
            "translate", old_run, "--glossary", glossary, *method, *options, stdin=line + "\n"
        )
        assert result.returncode == 0, result.stderr
        assert "glossary (check-first): 1 of 1 terms in the output; sentences by way: model 1" in result.stderr
        guide = ("--term-method", "guided")
        guided = run_mtkit_in_process("translate", old_run, "--glossary", glossary, *guide, *options, stdin=line + "\n")
        assert guided.stdout == plain.stdout  # the search placed a word the model writes anyway where it wrote it
        assert "glossary (guided): 1 of 1 terms in the output; sentences by way: guided 1" in guided.stderr
        default = run_mtkit_in_process("translate", old_run, "--glossary", glossary, *options, stdin=line + "\n")
        assert default.stdout == plain.stdout  # replace: an output that holds the target is left as it is
        assert "glossary (replace): 1 of 1 terms in the output; sentences by way: replace 1" in default.stderr


def test_a_models_default_term_method_and_the_one_asked(old_run: Path) -> None:
    assert split_options(load_translator(old_run)).term_method == "replace"  # no term hints
    ct2_like = SimpleNamespace(
        info={},
        max_source_tokens=256,
        guides_terms=False,
        tokenizer=SimpleNamespace(pieces=lambda: ["▁a"], target_pieces=lambda: ["▁a"]),
    )
    assert split_options(ct2_like).term_method == "replace"  # a search that does not place terms: the same
    hinted = SimpleNamespace(
        info={},
        max_source_tokens=256,
        guides_terms=False,
        tokenizer=SimpleNamespace(pieces=lambda: ["▁a", *TERM_PIECES], target_pieces=lambda: ["▁a", *TERM_PIECES]),
    )
    assert split_options(hinted).term_method == "inline"  # its hints first: one pass where it carries them
    assert split_options(hinted, options=TranslateOptions(term_method="check-first")).term_method == "check-first"


def test_mtkit_translate_takes_a_term_method_and_refuses_a_bad_one_in_one_line(old_run: Path, tmp_path: Path) -> None:
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("red shirt\tRothemd\n", encoding="utf-8")
    lines = "A man in a red shirt runs.\n"
    for options in (["--no-guard"], ["--split-sentences"], []):
        result = run_mtkit_in_process(
            "translate", old_run, "--glossary", glossary, "--term-method", "placeholder", *options, stdin=lines
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.count("Rothemd") == 1
        assert "glossary (placeholder): 1 of 1 terms in the output; sentences by way: placeholder 1" in result.stderr
    for command in (["translate", old_run], ["translate-file", old_run, tmp_path / "notes.txt"]):
        (tmp_path / "notes.txt").write_text(lines, encoding="utf-8")
        result = run_mtkit_in_process(*command, "--glossary", glossary, "--term-method", "hint", stdin=lines)
        assert result.returncode == 2 and result.stdout == ""
        assert result.stderr.strip().splitlines() == [
            "error: --term-method must be one of placeholder, inline, check-first, check-first-inline, guided, "
            "replace; got 'hint'"
        ]


def test_capitals_go_in_sentence_case_on_the_plain_path_unless_turned_off(old_run: Path) -> None:
    lines = "A man in a red shirt runs down the street.\n"
    upper = lines.upper()
    plain = run_mtkit_in_process("translate", old_run, stdin=lines).stdout
    cased = run_mtkit_in_process("translate", old_run, stdin=upper).stdout
    assert cased == plain.replace("ß", "ẞ").upper()
    raw = run_mtkit_in_process("translate", old_run, "--no-case", stdin=upper).stdout
    assert raw != cased


def test_mtkit_translate_file_keeps_spans_and_takes_a_glossary(old_run: Path, multi30k: Path, tmp_path: Path) -> None:
    cases = spanned_sentences(multi30k, 10)
    glossary = tmp_path / "terms.csv"
    glossary.write_text('"red shirt",Rothemd\n', encoding="utf-8")
    text = tmp_path / "notes.txt"
    text.write_text("\n\n".join(t for t, _ in cases) + "\n\nA man in a red shirt runs.\n\n12\n", encoding="utf-8")
    page = tmp_path / "table.html"
    page.write_text("<table><tr><td>12</td><td>3.5</td><td>2006</td><td>42 %</td></tr></table>", encoding="utf-8")
    for source in (text, page):
        result = run_mtkit_in_process(
            "translate-file", old_run, source, "--glossary", glossary, "-o", source.with_suffix(".de" + source.suffix)
        )
        assert result.returncode == 0, result.stderr
    out = text.with_suffix(".de.txt").read_text(encoding="utf-8").split("\n\n")
    assert [part.count(span) for part, (_, span) in zip(out, cases)] == [1] * 10
    assert out[-2].count("Rothemd") == 1 and out[-1] == "12\n"
    assert page.with_suffix(".de.html").read_text(encoding="utf-8") == page.read_text(encoding="utf-8")


def test_a_docx_of_300_sentences_keeps_every_span(old_run: Path, multi30k: Path, tmp_path: Path) -> None:
    docx = pytest.importorskip("docx")
    cases = spanned_sentences(multi30k)
    document = docx.Document()
    for text, _ in cases:
        document.add_paragraph(text)
    table = document.add_table(rows=1, cols=3)
    for cell, number in zip(table.rows[0].cells, ["12", "3.5", "42 %"]):
        cell.text = number
    source = tmp_path / "spans.docx"
    document.save(source)
    result = run_mtkit_in_process("translate-file", old_run, source, "-o", tmp_path / "spans.de.docx")
    assert result.returncode == 0, result.stderr
    done = docx.Document(tmp_path / "spans.de.docx")
    paragraphs = [p.text for p in done.paragraphs]
    assert [p.count(span) for p, (_, span) in zip(paragraphs, cases)] == [1] * 300
    assert [cell.text for cell in done.tables[0].rows[0].cells] == ["12", "3.5", "42 %"]
