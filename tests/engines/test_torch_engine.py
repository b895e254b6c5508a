"""The translator: batching never changes a translation, order and empty lines kept, cache == no cache, CLI formats."""

from __future__ import annotations

import io
import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from mtkit.engines.contract import length_batches
from mtkit.engines.streaming import CHUNK_LINES, translate_stream
from mtkit.engines.torch_engine import TorchTranslator, pad_batch, split_tail
from mtkit.errors import UserError
from mtkit.search.beam import search
from mtkit.search.config import TranslateConfig
from mtkit.search.step import SearchBatch
from tests.conftest import read_gz_lines, run_mtkit_in_process


class NoCacheDecoder:
    """The decoder contract without a key/value cache: re-decode the whole prefix every step."""

    def __init__(self, model) -> None:
        self.model = model

    def start(self, src):
        memory, src_pad = self.model.encode(src)
        return {"memory": memory, "src_pad": src_pad, "prefix": torch.empty(src.size(0), 0, dtype=torch.long)}

    def step(self, tokens, state):
        state["prefix"] = torch.cat([state["prefix"], tokens[:, None]], dim=1)
        hidden = self.model.decode(state["prefix"], state["memory"], state["src_pad"])
        return torch.log_softmax(self.model.project(hidden[:, -1]).float(), dim=-1)

    def log_probs(self, output, rows):
        return output[rows].clone()

    def reorder(self, state, order):
        return {k: v.index_select(0, order) for k, v in state.items()}


def test_length_batches_respects_budget() -> None:
    lengths = [5, 0, 3, 9, 3, 1]
    batches = length_batches(lengths, batch_tokens=8)
    assert sorted(i for b in batches for i in b) == [0, 2, 3, 4, 5]  # the empty line is not translated
    for batch in batches:
        assert len(batch) == 1 or len(batch) * (max(lengths[i] for i in batch) + 1) <= 8


@pytest.mark.exactness
def test_cache_equals_no_cache(tiny_run: Path, multi30k: Path) -> None:
    translator = TorchTranslator.load(tiny_run)
    model = translator.decoder.models[0]
    lines = read_gz_lines(multi30k / "val.en.gz", 12)
    ids = translator.tokenizer.encode(lines)
    src, src_lens = pad_batch(ids, 0, 3, torch.device("cpu"))
    cfg = TranslateConfig(beam=3, max_len_b=20)
    with torch.inference_mode():
        cached = search(translator.decoder, SearchBatch(src, src_lens, 0, 2, 3, 1024), cfg)
        plain = search(NoCacheDecoder(model), SearchBatch(src, src_lens, 0, 2, 3, 1024), cfg)
    for a, b in zip(cached, plain):
        assert [h.tokens for h in a] == [h.tokens for h in b]
        assert a[0].score == pytest.approx(b[0].score, abs=1e-4)


@pytest.mark.exactness
@pytest.mark.parametrize("beam", [1, 4])
def test_a_sentence_translates_alike_alone_in_any_batch_and_on_worker_threads(
    tiny_run: Path, multi30k: Path, beam: int
) -> None:
    """Bit-identical hypotheses and scores for 126 sentences translated alone, in batches of a 150-token budget
    (other padded widths), in beam search all in one batch beside the longest of 200 val sentences (1-4 token
    sentences padded far: MIN_SOURCE_WIDTH), and in 150-token batches decoded on 3 threads at once (each on its share of
    torch's threads, which are restored after). On an AVX2-only CPU 6 of 120 differed by 1 ulp at beam 4 before sources
    were padded to a multiple of SOURCE_WIDTH_MULTIPLE positions; on an Intel CPU held to AVX2, 2 in the one wide
    batch differed until a source's self-attention was computed in tiles (mtkit.model.transformer.ATTENTION_TILE)."""
    short = ["A dog.", "Two men.", "Kids play.", "A red car", "Rain"]
    lines = (
        short + read_gz_lines(multi30k / "val.en.gz", 120) + [max(read_gz_lines(multi30k / "val.en.gz", 200), key=len)]
    )
    options = dict(beam=beam, max_len_b=20)
    one = TorchTranslator.load(tiny_run, batch_tokens=150, **options)
    assert TorchTranslator.load(tiny_run).workers == 1
    assert len(length_batches([len(t) for t in one.encode_lines(lines)], 150)) >= 6
    alone = [one.translate_hypotheses([line])[0] for line in lines]
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        three = TorchTranslator.load(tiny_run, batch_tokens=150, workers=3, **options)
        assert three.workers == 3
        on_threads = three.translate_hypotheses(lines)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
    found = {"150 tokens": one.translate_hypotheses(lines), "3 workers": on_threads}
    if beam > 1:  # greedy search's last score bits depend on a batch this much wider (test_prefixes_in_both_engines)
        found["one batch"] = TorchTranslator.load(tiny_run, batch_tokens=100_000, **options).translate_hypotheses(lines)
    expected = [[(h.tokens, h.score) for h in hyps] for hyps in alone]
    for name, results in found.items():
        got = [[(h.tokens, h.score) for h in hyps] for hyps in results]
        differ = [i for i in range(len(lines)) if got[i] != expected[i]]
        assert differ == [], f"{name}: {len(differ)} lines differ from their translation alone, e.g. {differ[:5]}"


def test_split_tail_cuts_the_last_batches_into_pieces() -> None:
    batches = [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9, 10, 11], [12]]
    assert split_tail(batches, 2) == [[0, 1, 2, 3], [4, 5, 6], [7, 8], [9, 10, 11], [12]]
    assert split_tail(batches, 4) == [[0], [1], [2], [3], [4], [5], [6], [7], [8], [9], [10, 11], [12]]
    assert split_tail([[0, 1]], 1) == [[0, 1]]


def test_order_and_empty_lines(tiny_run: Path, multi30k: Path) -> None:
    translator = TorchTranslator.load(tiny_run, batch_tokens=200)
    lines = read_gz_lines(multi30k / "val.en.gz", 40)
    alone = {line: translator.translate([line])[0] for line in lines}
    mixed = lines[:] + ["", "", lines[0] + " " + lines[1]]
    random.Random(3).shuffle(mixed)
    out = translator.translate(mixed)
    assert len(out) == len(mixed)
    for src, hyp in zip(mixed, out):
        if src == "":
            assert hyp == ""
        elif src in alone:
            assert hyp == alone[src]


def test_overfit_model_translates_its_training_pairs(overfit_run: Path, multi30k: Path, tmp_path: Path) -> None:
    sources = read_gz_lines(multi30k / "train.en.gz", 64)
    refs = tmp_path / "ref.de"
    refs.write_text("\n".join(read_gz_lines(multi30k / "train.de.gz", 64)) + "\n", encoding="utf-8")
    src = tmp_path / "src.en"
    src.write_text("\n".join(sources) + "\n", encoding="utf-8")
    hyp = tmp_path / "hyp.de"
    run = run_mtkit_in_process("translate", overfit_run, "--input", src, "--output", hyp, "--quiet")
    assert run.returncode == 0, run.stderr
    score = run_mtkit_in_process("score", "--ref", refs, hyp, "--json")
    import json

    assert json.loads(score.stdout)["bleu"] >= 90


def mtkit(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mtkit", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        timeout=120,
    )


def translate_in_process(monkeypatch: pytest.MonkeyPatch) -> Any:
    """`mtkit translate ARGS` in this process (CliRunner): returncode, stdout and stderr apart. Its SIGPIPE setting
    and gc.freeze are for a process of its own and are left out. What only a process shows is proved by real ones:
    exit 2 with one line before any model load (test_cli), empty input, `| head` and a full disk
    (tests/reliability/test_translate_io.py), a damaged checkpoint (test_damaged_checkpoints_through_the_cli), a
    line answered as it arrives (test_an_open_pipe_gets_each_line_translated_as_it_arrives)."""
    import contextlib
    import types

    from typer.testing import CliRunner

    from mtkit.cli.main import app

    monkeypatch.setattr("signal.signal", lambda *args: None)
    monkeypatch.setattr("mtkit.cli.translate_command.start_up_without_gc", contextlib.nullcontext)

    def run(*args: str, stdin: str = "") -> Any:
        result = CliRunner().invoke(app, ["translate", *args], input=stdin)
        assert result.exit_code in (0, 2), (result.exception, result.stderr)  # 1: an exception escaped
        return types.SimpleNamespace(returncode=result.exit_code, stdout=result.stdout, stderr=result.stderr)

    return run


def test_cli_formats_and_errors(tiny_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    translate = translate_in_process(monkeypatch)
    text = "A man is sleeping.\n\nTwo dogs play in the snow.\n"
    plain = translate(str(tiny_run), "--beam", "2", stdin=text)
    assert plain.returncode == 0, plain.stderr
    assert len(plain.stdout.split("\n")) == 4 and plain.stdout.split("\n")[1] == ""
    nbest = translate(str(tiny_run), "--beam", "3", "--nbest", "2", stdin=text)
    rows = [line.split("\t") for line in nbest.stdout.splitlines()]
    assert [(r[0], r[1]) for r in rows] == [("0", "0"), ("0", "1"), ("1", "0"), ("1", "1"), ("2", "0"), ("2", "1")]
    assert float(rows[0][2]) >= float(rows[1][2])
    scored = translate(str(tiny_run), "--scores", stdin="A dog runs.\n")
    assert float(scored.stdout.split("\t")[0]) < 0
    empty = translate(str(tiny_run), stdin="")
    assert empty.returncode == 0 and empty.stdout == ""
    no_input = translate(str(tiny_run), "--input", str(tmp_path / "absent.en"))
    assert no_input.returncode == 2 and "absent.en: no such file" in no_input.stderr
    missing = translate(str(tmp_path / "nothing"), stdin="x\n")
    assert missing.returncode == 2 and "nothing" in missing.stderr and "Traceback" not in missing.stderr
    greedy = translate(str(tiny_run), "--beam", "1", stdin=text)
    assert greedy.returncode == 0 and len(greedy.stdout.splitlines()) == 3
    two = translate(str(tiny_run), "--beam", "2", "--workers", "2", stdin=text)
    assert two.returncode == 0 and two.stdout == plain.stdout
    negative = translate(str(tiny_run), "--workers", "-1", stdin=text)
    assert negative.returncode == 2 and "workers must be at least 1" in negative.stderr
    assert len(negative.stderr.strip().splitlines()) == 1


@pytest.mark.exactness
def test_ensemble_of_one_model_twice_equals_the_model(tiny_run: Path) -> None:
    """Log-linear: (a + a) / 2 is a in floating point, so the lines are the model's on every CPU. Linear: the log of
    the mean of equal probabilities is a up to rounding, so its scores are compared within a tolerance."""
    lines = ["A man is sleeping.", "A dog."]
    single = TorchTranslator.load(tiny_run)
    double = TorchTranslator.load(tiny_run, ensemble=[tiny_run])
    assert single.translate(lines) == double.translate(lines)
    linear = TorchTranslator.load(tiny_run, ensemble=[tiny_run], ensemble_mode="linear")
    ids = single.encode_lines(lines)
    targets = [hyps[0].tokens for hyps in single.search_ids(ids)]
    for alone, twice in zip(single.score_ids(ids, targets), linear.score_ids(ids, targets)):
        assert twice == pytest.approx(alone, abs=1e-5)


def read_line_within(handle, seconds: float) -> str:
    """One line from a pipe, or "" when none arrives within `seconds` (select: never blocks past the limit)."""
    import select

    data = b""
    deadline = time.monotonic() + seconds
    while not data.endswith(b"\n"):
        ready, _, _ = select.select([handle], [], [], max(deadline - time.monotonic(), 0))
        if not ready:
            return ""
        chunk = os.read(handle.fileno(), 4096)
        if not chunk:
            break
        data += chunk
    return data.decode("utf-8")


def test_an_open_pipe_gets_each_line_translated_as_it_arrives(tiny_run: Path) -> None:
    """A client writes one line and keeps the pipe open: the answer comes at once, equal to the batch translation."""
    lines = ["A man is sleeping on a bench.", "Two dogs play in the snow."]
    expected = TorchTranslator.load(tiny_run).translate(lines)
    console_script = Path(sys.executable).parent / "mtkit"
    process = subprocess.Popen(
        [str(console_script), "translate", str(tiny_run), "--quiet", "--no-guard"],  # the raw model, as `expected`
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    try:
        for i, (line, translation) in enumerate(zip(lines, expected)):
            process.stdin.write((line + "\n").encode())
            process.stdin.flush()
            sent = time.monotonic()
            answer = read_line_within(process.stdout, 60 if i == 0 else 10)  # the first one waits for the model load
            assert answer == translation + "\n", f"line {i + 1}: {answer!r} after {time.monotonic() - sent:.1f}s"
        process.stdin.close()
        assert process.wait(timeout=30) == 0 and process.stdout.read() == b""
        assert process.stderr.read() == b""
    finally:
        process.kill()
        process.wait()


class RecordingTranslator:
    """translate_stream's view of a translator: records each chunk it is given, translates every line to nothing."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []  # (first line number, lines)
        self.cfg = TranslateConfig()
        self.tokenizer = None

    def translate_hypotheses(
        self, lines: list[str], first_lineno: int = 1, strict: bool = False, terms: object = None
    ) -> list[list]:
        self.calls.append((first_lineno, len(lines)))
        return [[] for _ in lines]


def test_input_available_at_once_is_translated_in_whole_chunks() -> None:
    translator = RecordingTranslator()
    lines = CHUNK_LINES * 5 // 2
    out = io.StringIO()
    source = io.BytesIO(b"".join(f"line {i}\n".encode() for i in range(lines)))
    assert translate_stream(translator, source, out, quiet=True) == lines
    assert translator.calls == [
        (1, CHUNK_LINES),
        (CHUNK_LINES + 1, CHUNK_LINES),
        (2 * CHUNK_LINES + 1, lines - 2 * CHUNK_LINES),
    ]
    assert out.getvalue() == "\n" * lines


def test_a_pause_in_the_input_ends_a_chunk_and_reader_errors_reach_the_caller() -> None:
    def arriving():  # three lines, a pause, two lines
        yield from (b"a\n", b"b\n", b"c\n")
        time.sleep(0.5)
        yield from (b"d\n", b"e")

    translator = RecordingTranslator()
    assert translate_stream(translator, arriving(), io.StringIO(), quiet=True) == 5
    assert translator.calls == [(1, 3), (4, 2)]

    def failing():
        yield b"a\n"
        raise UserError("<stdin>:2: cannot read")

    threads = threading.active_count()
    with pytest.raises(UserError, match="<stdin>:2: cannot read"):
        translate_stream(RecordingTranslator(), failing(), io.StringIO(), quiet=True)
    assert threading.active_count() == threads  # the reader thread is gone


def test_device_auto_is_the_default_and_picks_the_cpu_here(tiny_run: Path) -> None:
    """`mtkit translate` defaults to --device auto: the GPU when there is one, the CPU on this machine."""
    import inspect

    from mtkit.cli.translate_command import translate as translate_command
    from mtkit.engines.torch_engine import TorchTranslator

    assert inspect.signature(translate_command).parameters["device"].default.default == "auto"
    translator = TorchTranslator.load(tiny_run, device="auto")
    assert translator.device == torch.device("cuda" if torch.cuda.is_available() else "cpu")
    assert translator.translate(["A man is sleeping."])[0]


def test_multilingual_model_answers_in_the_language_asked(en_de_fr_run: Path, multi30k: Path) -> None:
    """The same English, memorized into German and into French: --target-lang's code alone picks the language (every
    answer identified as it, most the memorized reference); a line that begins with the code answers as the option."""
    from mtkit.language_id import LanguageDetector
    from tests.conftest import MULTILINGUAL_SENTENCES, multilingual_lines

    text = multilingual_lines(multi30k, MULTILINGUAL_SENTENCES)
    detector = LanguageDetector(["de", "fr"])
    for lang in ("de", "fr"):
        translator = TorchTranslator.load(en_de_fr_run, target_lang=lang)
        answers = translator.translate(text["en"])
        assert [found[0].language for found in detector.detect(answers)] == [lang] * len(answers)
        assert sum(a == b for a, b in zip(answers, text[lang])) >= len(answers) * 3 // 4
        untold = TorchTranslator.load(en_de_fr_run)  # the opus-mt habit: the code in the text
        assert untold.translate([f">>{lang}<< {line}" for line in text["en"]]) == answers
    # The run directory lists what it translates: its data's manifest, copied in at the start of training.
    manifest = json.loads((en_de_fr_run / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["pairs"] == ["en-de", "en-fr"] and manifest["language_tokens"]


def test_target_lang_errors_are_one_line_exit_2(en_de_fr_run: Path, overfit_run: Path) -> None:
    """No --target-lang for a model of two codes, a code it lacks, another language than a model without codes
    translates into: each one line naming what the model knows; the one language of that model is accepted."""
    untold = mtkit("translate", str(en_de_fr_run), "--quiet", stdin="A man is sleeping.\n")
    assert (untold.returncode, untold.stdout, untold.stderr) == (
        2,
        "",
        (
            "error: line 1: --target-lang: this model translates into de, fr; choose one, or begin the line with its "
            "code, such as >>de<<\n"
        ),
    )
    unknown = mtkit("translate", str(en_de_fr_run), "--target-lang", "cs", stdin="A man is sleeping.\n")
    assert (unknown.returncode, unknown.stderr) == (
        2,
        "error: --target-lang cs: this model translates into de, fr; choose one\n",
    )
    with pytest.raises(
        UserError, match="^--target-lang fr: this model has no >>xx<< language codes; it translates into de only$"
    ):
        TorchTranslator.load(overfit_run, target_lang="fr")
    assert TorchTranslator.load(overfit_run, target_lang="de").translate(["A dog."]) == TorchTranslator.load(
        overfit_run
    ).translate(["A dog."])
