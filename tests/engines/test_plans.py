"""Sentence by sentence with a real (tiny) model: a paragraph translates alike alone, in a batch and on two workers;
its sentences as they translate one a line; `mtkit translate --split-sentences` keeps white space and scores lines;
and adversarial input is answered whole, nothing dropped or truncated."""

from __future__ import annotations

from pathlib import Path

import pytest

from mtkit.engines.factory import load_translator
from mtkit.engines.plans import split_options, translate_split
from mtkit.search.config import SearchOverrides
from mtkit.text.sentences import split_sentences
from tests.conftest import run_mtkit_in_process

ADVERSARIAL = [
    "a man in a red shirt walks down the street with a dog and two children while it rains",  # no punctuation
    "A dog runs. " * 420,  # 5,040 characters on one line
    "🙂🙂🎉",
    "A dog 🙂 runs. Ein Hund läuft. Собака бежит. 狗在跑。",
    "Dr. Smith met Mr. Jones, e.g. at 3.50 p.m. on the U.S. coast. Then they left.",
    "Prices rose by 3.5% to 1,234.56 euros. See https://example.com/a.b?c=1 or www.example.org. Fine.",
    "x" * 3000,  # one word longer than the model's input
]


@pytest.fixture(scope="module")
def paragraphs(lines: list[str]) -> list[str]:
    """Multi30k test sentences that end with a full stop, three to a paragraph."""
    stops = [line for line in lines if line.endswith(".") and len(split_sentences(line, "en").sources) == 1][:30]
    return [" ".join(stops[i : i + 3]) for i in range(0, len(stops), 3)]


def test_a_paragraph_translates_alike_alone_in_a_batch_and_on_two_workers(run: Path, paragraphs: list[str]) -> None:
    one = load_translator(run)
    options = split_options(one)
    done = translate_split(one, paragraphs, options)
    batched = [t.text for t in done]
    assert batched == [translate_split(one, [p], options)[0].text for p in paragraphs]
    two = load_translator(run, search=SearchOverrides(workers=2))
    assert [t.text for t in translate_split(two, paragraphs, options)] == batched
    # each sentence as the model translates it one a line, but where the guard refused that (this tiny model loops)
    sentences = [s for t in done for s in t.sentences]
    assert [s.source for s in sentences] == [s for p in paragraphs for s in split_sentences(p, "en").sources]
    assert len(sentences) == 3 * len(paragraphs)
    alone = dict(zip((s.source for s in sentences), one.translate([s.source for s in sentences])))
    untouched = [s for s in sentences if not s.guard]
    assert len(untouched) >= len(sentences) // 4  # this tiny model drops words of many long sentences: retried
    assert [s.translation for s in untouched] == [alone[s.source] for s in untouched]
    assert all(s.translation != alone[s.source] for s in sentences if s.guard)


def test_translate_split_sentences_cli(run: Path, paragraphs: list[str]) -> None:
    text = "\n".join([paragraphs[0], "", "  " + paragraphs[1] + "  ", paragraphs[2]]) + "\n"
    result = run_mtkit_in_process("translate", run, "--split-sentences", "-q", stdin=text)
    assert result.returncode == 0, result.stderr
    out = result.stdout.splitlines()
    assert len(out) == 4 and out[1] == "" and out[2].startswith("  ") and out[2].endswith("  ")
    translator = load_translator(run)
    assert out[0] == translate_split(translator, [paragraphs[0]], split_options(translator))[0].text
    # one sentence the guard lets through (this tiny model loops on some and shortens others): --scores gives the
    # line's figures with and without splitting
    done = translate_split(translator, paragraphs, split_options(translator))
    single = next(s.source for t in done for s in t.sentences if not s.guard)
    plain = run_mtkit_in_process("translate", run, "--scores", "-q", stdin=single + "\n").stdout
    split = run_mtkit_in_process("translate", run, "--scores", "--split-sentences", "-q", stdin=single + "\n").stdout
    assert plain == split and len(plain.split("\t")) == 3
    score, confidence, _ = plain.split("\t")
    assert float(confidence) < 0 and float(score) < 0
    refused = run_mtkit_in_process("translate", run, "--split-sentences", "--nbest", "2", stdin=single)
    assert refused.returncode == 2 and "--split-sentences" in refused.stderr  # a usage error


def test_adversarial_input_is_answered_whole(run: Path) -> None:
    result = run_mtkit_in_process("translate", run, "--split-sentences", stdin="\n".join(ADVERSARIAL) + "\n")
    assert result.returncode == 0, result.stderr
    out = result.stdout.splitlines()
    assert len(out) == len(ADVERSARIAL) and all(line.strip() for line in out)
    assert out[2] == "🙂🙂🎉"  # no words: kept as written
    assert "sentences" in result.stderr and "tamed" in result.stderr  # the guard's counts
    translator = load_translator(run)
    done = translate_split(translator, ADVERSARIAL, split_options(translator))
    for source, text in zip(ADVERSARIAL, done):
        assert text.text.strip() and all(s.translation.strip() for s in text.sentences)
        # every character of the source went to the model or was kept: the sentences spell the source
        assert "".join("".join(s.source.split()) for s in text.sentences) == "".join(source.split())
    limit = split_options(translator).limit
    assert all(len(translator.tokenizer.encode([s.source])[0]) <= limit for t in done for s in t.sentences)
