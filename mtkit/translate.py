"""Translation: load a run's model and tokenizer, batch by length, search, restore input order, stream.

`Translator` is the Python API (services, notebooks); `translate_stream` is what the CLI runs. Input is
read in chunks, so memory stays flat on any input length; outputs of a chunk are written as it finishes. A chunk
ends at CHUNK_LINES or when the input pauses, so a line typed or piped into an open stream is answered at once.
"""

from __future__ import annotations

import math
import queue
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any, BinaryIO, Callable

import torch
from torch import Tensor

from mtkit.batching import round_up
from mtkit.checkpoint import AVERAGE_NAME, latest_valid_checkpoint, load_checkpoint
from mtkit.console import log, progress, warn
from mtkit.errors import UserError, check
from mtkit.files import read_stream_lines
from mtkit.model import ModelConfig, Transformer, configure_cuda_kernels, cuda_lacks_bf16
from mtkit.packed import pack_linears
from mtkit.readahead import END, ReadAhead
from mtkit.search import Hypothesis, ModelDecoder, TranslateConfig, search
from mtkit.tokenizer import Tokenizer

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
CHUNK_LINES = 2000  # lines read, sorted by length and translated together before output
# A chunk also ends when no line has arrived for this long: a file or a fast pipe delivers its next line within
# microseconds, so it still fills whole chunks, while a line from a person or a client is translated at once.
PAUSE_SECONDS = 0.05
# ATen multiplies small matrices (under 400 multiply-adds each) in its own loop and larger ones with BLAS, and
# the two round differently. A short sentence alone would take the loop in attention over its source, and the
# same sentence padded in a batch would take BLAS. At least 16 source positions (masked padding) keep every
# sentence on BLAS for head sizes >= 25, so its scores do not depend on its batch.
MIN_SOURCE_WIDTH = 16


def resolve_device(name: str) -> str:
    """`auto` -> cuda when a CUDA device is available, else cpu; any other name as given."""
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


def resolve_checkpoint(path: Path) -> Path:
    """RUN_DIR -> its averaged model, else its newest valid checkpoint; a file is used as given."""
    path = Path(path)
    check(path.exists(), f"{path}: no such run directory or checkpoint")
    if path.is_file():
        return path
    if (path / AVERAGE_NAME).is_file():
        return path / AVERAGE_NAME
    found = latest_valid_checkpoint(path, warn=warn)
    check(found is not None, f"{path}: no checkpoint found (train first, or name a checkpoint file)")
    return found[0]  # type: ignore[index]


def load_model(path: Path, device: torch.device, dtype: torch.dtype, packed: bool = True) -> tuple[Transformer, dict]:
    """Rebuild the model from a checkpoint's own configuration; refuse a mismatch in one line.

    `packed`: float32 CPU linears go through oneDNN with packed weights (mtkit.packed; about 1.07x decoding).
    """
    payload = load_checkpoint(path)
    try:
        model = Transformer(ModelConfig(**payload["configs"]["model"]))
        model.load_state_dict(payload["model"])
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        raise UserError(f"{path}: checkpoint does not match its configuration ({type(exc).__name__})") from None
    model.to(device=device, dtype=dtype).eval()
    if packed:
        pack_linears(model)
    return model, payload


@dataclass
class Translator:
    """Load once, translate many: `Translator.load(RUN_DIR).translate(["A man is sleeping."])`."""

    decoder: ModelDecoder
    tokenizer: Tokenizer
    cfg: TranslateConfig
    model_cfg: ModelConfig
    device: torch.device
    # What the checkpoint says of itself (its path, resolved recipe, data manifest), for mtkit serve's /info.
    info: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(
        cls, path: str | Path, device: str = "cpu", dtype: str = "fp32", ensemble: list[Path] | None = None,
        packed: bool = True, **overrides: Any,
    ) -> "Translator":
        device = resolve_device(device)
        check(dtype in DTYPES, f"--dtype must be one of {', '.join(DTYPES)}")
        check(device != "cuda" or torch.cuda.is_available(), "--device cuda: no CUDA device is available")
        check(not (dtype == "bf16" and cuda_lacks_bf16(device)),
              f"--dtype bf16: {device} has no bf16 support (pre-Ampere GPU); use --dtype fp16 or fp32")
        check(not (dtype == "fp16" and device == "cpu"), "--dtype fp16 needs --device cuda; use bf16 on CPU")
        target = torch.device(device)
        configure_cuda_kernels(target)
        main_path = resolve_checkpoint(Path(path))
        model, payload = load_model(main_path, target, DTYPES[dtype], packed)
        models = [model]
        for extra in ensemble or []:
            other, other_payload = load_model(resolve_checkpoint(Path(extra)), target, DTYPES[dtype], packed)
            check(other_payload.get("spm_sha256") == payload.get("spm_sha256"), f"{extra}: another vocabulary than {main_path}")
            models.append(other)
        check("spm_model" in payload, f"{main_path}: checkpoint carries no sentencepiece model")
        tokenizer = Tokenizer.from_bytes(payload["spm_model"])
        try:
            cfg = replace(TranslateConfig(**payload["configs"].get("translate", {})), **overrides)
        except (TypeError, ValueError) as exc:
            raise UserError(f"translate options: {exc}") from None
        info = {"checkpoint": str(main_path), "configs": payload["configs"], "manifest": payload.get("manifest", {})}
        return cls(ModelDecoder(models), tokenizer, cfg, model.cfg, target, info)

    @property
    def max_source_tokens(self) -> int:
        return self.model_cfg.max_positions - 1  # room for eos

    def translate(self, lines: list[str]) -> list[str]:
        """One output per input line, in order; empty lines give empty outputs."""
        hypotheses = self.translate_hypotheses(lines)
        return [one_line(self.tokenizer.decode([hyps[0].tokens])[0]) if hyps else "" for hyps in hypotheses]

    def translate_hypotheses(self, lines: list[str], first_lineno: int = 1, strict: bool = False) -> list[list[Hypothesis]]:
        """n-best hypotheses per line (an empty list for an empty or whitespace-only line), in input order."""
        return self.search_ids(self.encode_lines(lines, first_lineno, strict))

    def encode_lines(
        self, lines: list[str], first_lineno: int = 1, strict: bool = False, on_warning: Callable[[str], None] = warn,
    ) -> list[list[int]]:
        """Source ids per line; a line over the model's length is truncated with a warning, or refused when strict.

        `on_warning` receives each warning (mtkit.serve collects them per request instead of printing them).
        """
        # Stripped as preprocess strips the training text, so a whitespace-only line translates to nothing.
        ids = self.tokenizer.encode([line.strip() for line in lines])
        for offset, tokens in enumerate(ids):
            if len(tokens) > self.max_source_tokens:
                where = f"line {first_lineno + offset}"
                check(not strict, f"{where}: {len(tokens)} tokens, over the model's {self.max_source_tokens} (--strict)")
                on_warning(f"{where}: {len(tokens)} tokens, truncated to {self.max_source_tokens}")
                ids[offset] = tokens[: self.max_source_tokens]
        return ids

    @property
    def workers(self) -> int:
        """Batches decoded at once: cfg.workers on CPU, 1 elsewhere."""
        return self.cfg.workers if self.device.type == "cpu" else 1

    def search_ids(self, ids: list[list[int]]) -> list[list[Hypothesis]]:
        """n-best hypotheses per id sequence (none for an empty one), in input order, batched by length.

        On CPU `workers` batches are decoded at once, each on its share of torch's threads, as CTranslate2's
        inter_threads; each sentence's output is the same either way (tests/test_translate.py).
        """
        results: list[list[Hypothesis]] = [[] for _ in ids]
        lengths = [len(t) for t in ids]
        batches = length_batches(lengths, self.cfg.batch_tokens)
        workers = min(self.workers, len(batches))
        if workers > 1:
            # The costliest batches (most padded tokens) first, the tail in pieces: the workers end close together.
            batches.sort(key=lambda batch: -len(batch) * (lengths[batch[-1]] + 1))
            batches = split_tail(batches, workers)

        def run(batch: list[int]) -> list[list[Hypothesis]]:
            return self._search([ids[i] for i in batch])

        with decode_threads(workers) as map_batches:
            for batch, hyps in zip(batches, map_batches(run, batches)):
                for index, one in zip(batch, hyps):
                    results[index] = one
        return results

    @torch.inference_mode()
    def _search(self, ids: list[list[int]]) -> list[list[Hypothesis]]:
        src, src_lens = pad_batch(ids, self.model_cfg.pad_id, self.model_cfg.eos_id, self.device)
        c = self.model_cfg
        return search(self.decoder, src, src_lens, self.cfg, c.bos_id, c.eos_id, c.pad_id, c.max_positions)


def pad_batch(ids: list[list[int]], pad_id: int, eos_id: int, device: torch.device) -> tuple[Tensor, Tensor]:
    """src [B, S] (tokens + eos, right-padded to at least MIN_SOURCE_WIDTH) and src_lens [B] (eos excluded)."""
    width = max(max(len(t) for t in ids) + 1, MIN_SOURCE_WIDTH)
    if torch.device(device).type == "cuda":
        width = int(round_up(width, 8))  # a bounded set of source shapes for the GPU kernels
    src = torch.full((len(ids), width), pad_id, dtype=torch.long)
    for row, tokens in enumerate(ids):
        src[row, : len(tokens)] = torch.tensor(tokens, dtype=torch.long)
        src[row, len(tokens)] = eos_id
    return src.to(device), torch.tensor([len(t) for t in ids], device=device)


def length_batches(lengths: list[int], batch_tokens: int) -> list[list[int]]:
    """Indices of non-empty inputs, sorted by length and grouped so n * (longest + 1) <= batch_tokens.

    A sentence longer than the budget still gets a batch of its own.
    """
    order = sorted((i for i, n in enumerate(lengths) if n > 0), key=lambda i: (lengths[i], i))
    batches: list[list[int]] = []
    current: list[int] = []
    for index in order:
        width = lengths[index] + 1
        if current and (len(current) + 1) * width > batch_tokens:
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches


@contextmanager
def decode_threads(workers: int) -> Iterator[Callable]:
    """A `map` that runs on `workers` threads, each on 1/workers of torch's threads (restored after); the builtin
    map for one worker.

    Not the default: on the 2-core test machine two workers of one thread decoded 1.05-1.07x the sentences/s of
    one batch on two threads and peaked about 30% higher (BENCHMARKS.md, "Same model against CTranslate2",
    2026-11-23).
    """
    if workers <= 1:
        yield map
        return
    threads = torch.get_num_threads()
    torch.set_num_threads(max(1, threads // workers))  # process-wide
    pool = ThreadPoolExecutor(workers, thread_name_prefix="mtkit-decode")
    try:
        yield pool.map
    finally:
        pool.shutdown(cancel_futures=True)
        torch.set_num_threads(threads)


def split_tail(batches: list[list[int]], parts: int) -> list[list[int]]:
    """The last `parts` batches each cut into `parts` pieces (of consecutive sentences; empty ones dropped).

    With `parts` workers taking batches in turn, a worker that finds none left waits for the others' last
    batches: pieces make that wait short (two workers on the 1,000 test lines ended 0.5 s apart, now 0.06 s).
    """
    head, tail = batches[: len(batches) - parts], batches[len(batches) - parts :]
    pieces = [batch[i * len(batch) // parts : (i + 1) * len(batch) // parts] for batch in tail for i in range(parts)]
    return head + [piece for piece in pieces if piece]


def one_line(text: str) -> str:
    """A decoded text as one output line: byte-fallback pieces can decode to "\n" or "\r", which would split it."""
    return text.replace("\r", " ").replace("\n", " ")


def format_output(hyps: list[Hypothesis], tokenizer: Tokenizer, index: int, nbest: int, with_scores: bool) -> list[str]:
    """One line per input (nbest 1), or `INDEX<TAB>RANK<TAB>SCORE<TAB>TEXT` lines for each of the n best."""
    texts = [one_line(text) for text in tokenizer.decode([h.tokens for h in hyps])] if hyps else [""]
    scores = [h.score for h in hyps] if hyps else [0.0]
    if nbest == 1:
        return [f"{scores[0]:.4f}\t{texts[0]}" if with_scores else texts[0]]
    rows = list(zip(texts, scores)) + [("", -math.inf)] * (nbest - len(texts))
    return [f"{index}\t{rank}\t{score:.4f}\t{text}" for rank, (text, score) in enumerate(rows[:nbest])]


def translate_stream(
    translator: Translator, source: BinaryIO, target: IO[str], with_scores: bool = False, strict: bool = False,
    quiet: bool = False, name: str = "<stdin>",
) -> int:
    """Translate `source` line by line into `target`, chunk by chunk; returns the number of lines."""
    chunks = read_chunks(source, name, CHUNK_LINES, PAUSE_SECONDS)
    done = 0
    start = time.monotonic()
    try:
        with progress(quiet) as bar:
            task = bar.add_task("translate", total=None, info="")
            for chunk in chunks:
                results = translator.translate_hypotheses(chunk, first_lineno=done + 1, strict=strict)
                out = []
                for offset, hyps in enumerate(results):
                    out.extend(format_output(hyps, translator.tokenizer, done + offset, translator.cfg.nbest, with_scores))
                target.write("\n".join(out) + "\n")
                target.flush()
                done += len(chunk)
                rate = done / max(time.monotonic() - start, 1e-9)
                bar.update(task, completed=done, info=f"{rate:.1f} sent/s")
    finally:
        chunks.close()  # stops the reader thread when translation failed before the input ended
    if not quiet and done:
        seconds = time.monotonic() - start
        log(f"translated {done} lines in {seconds:.2f}s ({done / max(seconds, 1e-9):.1f} sent/s)")
    return done


def read_chunks(source: BinaryIO, name: str, max_lines: int, pause: float) -> Iterator[list[str]]:
    """Lists of up to `max_lines` lines of `source`: a list ends when full, at the end, or when no line has come
    for `pause` seconds. A reader error (mtkit.files' one-line UserError among them) is raised here, in the
    caller's thread.

    The lines are read ahead on a thread (two chunks: the next chunk is ready while one is translated). Closing
    the generator stops it; one still blocked on an open, silent stdin is left to die with the process.
    """
    lines = ReadAhead(read_stream_lines(source, name), 2 * max_lines, "mtkit-read")
    try:
        while (item := lines.get()) is not END:  # the first line of a chunk: wait as long as the input does
            chunk = [item]
            while len(chunk) < max_lines:
                try:
                    item = lines.get(timeout=pause)
                except queue.Empty:
                    break
                if item is END:
                    break
                chunk.append(item)
            yield chunk  # type: ignore[misc]
            if item is END:
                return
    finally:
        lines.close(timeout=1.0)
