"""translate at the edges: empty input, a closed pipe (`| head -1`), a full disk, a model that never
ends a sentence, and a model whose output decodes to line breaks."""

from __future__ import annotations

import io
import shlex
from pathlib import Path

import pytest
import sentencepiece as spm

from mtkit.engines.streaming import CHUNK_LINES, translate_stream
from mtkit.engines.torch_engine import TorchTranslator
from mtkit.runs.checkpoint import load_checkpoint
from mtkit.tokenizer import BOS_ID, EOS_ID
from tests.conftest import MULTI30K, read_gz_lines
from tests.reliability.common import forced_logits_checkpoint, mtkit_command, record, run_bounded, run_cli

FAST = ["--beam", "1", "--max-len-a", "0", "--max-len-b", "3", "--quiet"]


@pytest.fixture(scope="module")
def source_text(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two and a half translate chunks of Multi30k English."""
    path = tmp_path_factory.mktemp("translate_io") / "input.en"
    lines = read_gz_lines(MULTI30K / "train.en.gz", CHUNK_LINES * 5 // 2)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_empty_input_and_closed_pipe_and_full_disk(reliability_run: Path, source_text: Path) -> None:
    empty = run_cli("translate", reliability_run, *FAST, stdin=b"")
    assert empty.returncode == 0 and empty.stdout == "" and "Traceback" not in empty.stderr

    pipeline = (
        f"{shlex.join(mtkit_command('translate', reliability_run, *FAST))} < {shlex.quote(str(source_text))} | head -1"
    )
    head = run_bounded(["bash", "-c", pipeline], 300)
    assert head.returncode == 0 and len(head.stdout.splitlines()) == 1
    assert head.stderr == "", head.stderr[-2000:]  # no traceback, no BrokenPipeError, nothing at all

    full = []
    for redirect in ("> /dev/full", "-o /dev/full"):
        command = (
            f"{shlex.join(mtkit_command('translate', reliability_run, *FAST))} {redirect} "
            f"< {shlex.quote(str(source_text))}"
        )
        full.append(run_bounded(["bash", "-c", command], 300))
    for done in full:
        assert done.returncode == 74 and "No space left on device" in done.stderr, done.stderr[-2000:]
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    record(
        "translate_io",
        "empty input -> exit 0, no output; `| head -1` -> 1 line, empty stderr; stdout or -o on "
        "/dev/full -> exit 74 with one line (2/2)",
    )


def test_a_model_that_never_emits_eos_stops_at_max_length(tmp_path: Path, reliability_run: Path) -> None:
    model = forced_logits_checkpoint(
        reliability_run / "average.pt", tmp_path / "no_eos.pt", {EOS_ID: -1e4, BOS_ID: -1e4}
    )
    lines = read_gz_lines(MULTI30K / "val.en.gz", 40) + [""]
    counts = {}
    for beam in (1, 4):
        translator = TorchTranslator.load(model, beam=beam, max_len_a=0.0, max_len_b=7)
        hypotheses = translator.translate_hypotheses(lines)
        assert [len(h[0].tokens) for h in hypotheses[:-1]] == [7] * 40 and hypotheses[-1] == []
        out = io.StringIO()
        assert translate_stream(translator, io.BytesIO("\n".join(lines).encode() + b"\n"), out, quiet=True) == 41
        counts[beam] = out.getvalue().count("\n")
    assert counts == {1: 41, 4: 41}
    record("never_eos", "model that never emits eos: 40/40 lines end at max length 7 (greedy and beam 4), 41 lines out")


def test_outputs_that_decode_to_line_breaks_stay_on_one_line(tmp_path: Path, reliability_run: Path) -> None:
    """Byte-fallback pieces can decode to "\\n" or "\\r"; an output must still be one line."""
    payload = load_checkpoint(reliability_run / "average.pt")
    pieces = spm.SentencePieceProcessor(model_proto=payload["spm_model"])
    newline, carriage = pieces.piece_to_id("<0x0A>"), pieces.piece_to_id("<0x0D>")
    lines = "A man.\n\nTwo dogs play.\nA\u2028B\n"
    counts = {}
    for name, token in (("newline", newline), ("carriage return", carriage)):
        model = forced_logits_checkpoint(reliability_run / "average.pt", tmp_path / f"{name}.pt", {token: 1e4})
        done = run_cli("translate", model, *FAST, stdin=lines.encode())
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.count("\n") == 4 and "\r" not in done.stdout, repr(done.stdout)
        assert done.stdout.split("\n")[1] == ""  # the empty line stays empty
        counts[name] = done.stdout.count("\n")
    record(
        "line_breaks_in_output",
        f"model emitting only \\n / \\r byte pieces: 4 input lines -> {counts['newline']} / "
        f"{counts['carriage return']} output lines",
    )
