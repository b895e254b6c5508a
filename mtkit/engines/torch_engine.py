"""Translation with mtkit's own (torch) engine: load a run's model and tokenizer, batch by length, search,
restore input order.

`TorchTranslator` is the torch engine's class; `mtkit.engines.factory.load_translator` gives either engine behind one
interface (docs/translating.md, "From Python"). Streaming, what the CLI runs over either engine, is
mtkit.engines.streaming.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch import Tensor

from mtkit.console import warn
from mtkit.corpus.batching import round_up
from mtkit.corpus.fuzzy_matches import fuzzy_piece
from mtkit.corpus.term_hints import term_piece_ids
from mtkit.engines.contract import (
    Ids,
    TermIds,
    Translating,
    check_target_lang,
    length_batches,
)
from mtkit.errors import UserError, check
from mtkit.model.alignment import cross_attention_weights
from mtkit.model.precision import PRECISIONS, configure_cuda_kernels, resolve_precision
from mtkit.model.transformer import ModelConfig, preset_name
from mtkit.runs.checkpoint import resolve_checkpoint
from mtkit.runs.model import load_model
from mtkit.search.beam import search
from mtkit.search.config import Hypothesis, TranslateConfig
from mtkit.search.matches import MatchGuide, match_table
from mtkit.search.step import ModelDecoder, SearchBatch, combine
from mtkit.search.terms import TermGuide, term_table
from mtkit.tokenizer import TableTokenizer, Tokenizer, tokenizer_from_bytes

# Streaming, output formats and length batching moved to torch-free modules; the names stay importable from here.

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# ATen multiplies small matrices (under 400 multiply-adds each) in its own loop and larger ones with BLAS, and
# the two round differently. A short sentence alone would take the loop in attention over its source, and the
# same sentence padded in a batch would take BLAS. At least 16 source positions (masked padding) keep every
# sentence on BLAS for head sizes >= 25, so its scores do not depend on its batch.
MIN_SOURCE_WIDTH = 16
# BLAS (MKL) computes a one-row query's scores against the source keys with the columns in blocks of the vector
# width and a tail in other code: on an AVX2-only CPU a key's score then depends on where the padded width puts
# it (seen on 6 of 120 sentences, 1 ulp). With the width a multiple of 16, every key sits in a whole block
# however many more the batch adds (checked at every width to 100 on an AVX2-only CPU). The same
# multiple bounds the set of source shapes the GPU kernels see.
SOURCE_WIDTH_MULTIPLE = 16
SENTENCE_ENDS = (".", "!", "?")  # what closes a sentence, at a target piece's end (ends_sentence)
T = TypeVar("T")  # what TorchTranslator._by_length's run gives for a pair


def resolve_torch_device(name: str) -> str:
    """`auto` -> cuda when a CUDA device is available, else cpu; any other name as given."""
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


def resolve_dtype(dtype: str, device: str) -> str:
    """--dtype on `device`: auto is bf16 where it runs natively, else fp32; refused in one line where it cannot run."""
    check(dtype in PRECISIONS, f"--dtype must be one of {', '.join(PRECISIONS)}")
    check(not (dtype == "fp16" and device == "cpu"), "--dtype fp16 needs --device cuda; use fp32, or bf16 on CPU")
    try:
        return resolve_precision(dtype, device, "--dtype", warn)
    except ValueError as exc:
        raise UserError(str(exc)) from None


@dataclass
class TorchTranslator(Translating):  # what both engines share: Translating's own members
    """Load once, translate many: `TorchTranslator.load(RUN_DIR).translate(["A man is sleeping."])`."""

    decoder: ModelDecoder
    tokenizer: Tokenizer | TableTokenizer
    cfg: TranslateConfig
    model_cfg: ModelConfig
    device: torch.device
    # What the checkpoint says of itself (its path, resolved recipe, data manifest), for mtkit serve's /info.
    info: dict[str, Any] = field(default_factory=dict)
    guides_terms: bool = field(default=True, init=False)  # mtkit's search places glossary terms (search_ids)

    @classmethod
    def load(
        cls,
        path: str | Path,
        device: str = "cpu",
        dtype: str = "fp32",
        ensemble: list[Path] | None = None,
        packed: bool = True,
        ensemble_mode: str = "log-linear",
        threads: int = 0,
        **overrides: Any,
    ) -> TorchTranslator:
        """`threads`: torch's thread count, process-wide (0: leave it); `overrides`: TranslateConfig fields set over
        the checkpoint's recipe."""
        if threads:
            torch.set_num_threads(threads)
        device = resolve_torch_device(device)
        check(device != "cuda" or torch.cuda.is_available(), "--device cuda: no CUDA device is available")
        dtype = resolve_dtype(dtype, device)
        target = torch.device(device)
        configure_cuda_kernels(target)
        main_path = resolve_checkpoint(Path(path))
        model, payload = load_model(main_path, target, DTYPES[dtype], packed)
        models = [model]
        for extra in ensemble or []:
            other, other_payload = load_model(resolve_checkpoint(Path(extra)), target, DTYPES[dtype], packed)
            check(
                other_payload.get("spm_sha256") == payload.get("spm_sha256"),
                f"{extra}: another vocabulary than {main_path}",
            )
            models.append(other)
        check("spm_model" in payload, f"{main_path}: checkpoint carries no sentencepiece model")
        tokenizer = tokenizer_from_bytes(payload["spm_model"])
        try:
            cfg = replace(TranslateConfig(**payload["configs"].get("translate", {})), **overrides)
        except TypeError as exc:  # an unknown key; a bad value is TranslateConfig's own UserError, naming it
            raise UserError(f"translate options: {exc}") from None
        info = {"checkpoint": str(main_path), "configs": payload["configs"], "manifest": payload.get("manifest", {})}
        info["threads"] = torch.get_num_threads()  # a GEMM's rounding, so a line's translation, can depend on it
        check_target_lang(tokenizer, cfg.target_lang, info["manifest"])
        # A run trained with term hints never writes their pieces (mtkit.corpus.term_hints): none of them is searched.
        decoder = ModelDecoder(models, ensemble_mode, term_piece_ids(tokenizer))
        return cls(decoder, tokenizer, cfg, model.cfg, target, info)

    @property
    def max_source_tokens(self) -> int:
        return self.model_cfg.max_positions - 1  # room for eos

    def describe(self) -> dict[str, Any]:
        """The model as mtkit serve's /info reports it: its preset (when its sizes are one), parameters, precision."""
        model = self.decoder.models[0]
        dtype = str(next(model.parameters()).dtype).removeprefix("torch.")
        return {
            "arch": preset_name(self.model_cfg),
            "parameters": sum(p.numel() for p in model.parameters()),
            "dtype": {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}.get(dtype, dtype),
        }

    def search_ids(
        self, ids: Ids, prefixes: Ids | None = None, terms: TermIds | None = None, align: bool = False
    ) -> list[list[Hypothesis]]:
        """n-best hypotheses per id sequence (none for an empty one), in input order, batched by length;
        `prefixes` (target ids per sequence, [] for none) are forced at the start of each translation; `terms` (the
        target ids of each glossary term a sequence must hold) guide the search (mtkit.search.terms); `align`: each
        hypothesis keeps its tokens' attention over its source ids (attention_ids' rows, from the search's steps).

        On CPU `workers` batches are decoded at once, each on its share of torch's threads, as CTranslate2's
        inter_threads; each sentence's output is the same either way (tests/engines/test_torch_engine.py).
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
            return self._search(
                [ids[i] for i in batch],
                [prefixes[i] for i in batch] if prefixes else None,
                [terms[i] for i in batch] if terms else None,
                align,
            )

        with decode_threads(workers) as map_batches:
            for batch, hyps in zip(batches, map_batches(run, batches)):
                for index, one in zip(batch, hyps):
                    results[index] = one
        return results

    def score_ids(self, src: list[list[int]], tgt: list[list[int]]) -> list[list[float]]:
        """Per-piece log-probabilities of each target and its end of sentence, batched by length as search_ids
        batches; an ensemble's combine its members' as the search does (mtkit.search.step.combine)."""
        return self._by_length(src, tgt, self._score)

    @torch.inference_mode()
    def _score(self, src_ids: list[list[int]], tgt_ids: list[list[int]]) -> list[list[float]]:
        c = self.model_cfg
        src, _ = pad_batch(src_ids, c.pad_id, c.eos_id, self.device)
        tgt_in = torch.full((len(tgt_ids), max(len(t) for t in tgt_ids) + 1), c.pad_id, dtype=torch.long)
        tgt_out = tgt_in.clone()
        for row, tokens in enumerate(tgt_ids):  # padding after a target: the causal mask keeps it out of its scores
            tgt_in[row, : len(tokens) + 1] = torch.tensor([c.start_id, *tokens])
            tgt_out[row, : len(tokens) + 1] = torch.tensor([*tokens, c.eos_id])
        tgt_in, tgt_out = tgt_in.to(self.device), tgt_out.to(self.device)
        logps = [torch.log_softmax(model(src, tgt_in).float(), dim=-1) for model in self.decoder.models]
        picked = combine(logps, self.decoder.mode).gather(2, tgt_out[..., None])[..., 0].cpu()
        return [picked[row, : len(tokens) + 1].tolist() for row, tokens in enumerate(tgt_ids)]

    @torch.inference_mode()
    def _search(
        self, ids: Ids, prefixes: Ids | None, terms: TermIds | None = None, align: bool = False
    ) -> list[list[Hypothesis]]:
        src, src_lens = pad_batch(ids, self.model_cfg.pad_id, self.model_cfg.eos_id, self.device)
        if terms is not None and self.decoder.suppressed:
            never = set(self.decoder.suppressed)  # a target the search may never write is left to the stand-ins
            terms = [[term for term in line if never.isdisjoint(term)] for line in terms]
        table = None if terms is None else term_table(terms, self.device)
        c = self.model_cfg
        # Search's bos is what rows start from and never emit: the decoder's start token (for mtkit's models: bos).
        batch = SearchBatch(
            src, src_lens, c.pad_id, c.start_id, c.eos_id, c.max_positions, prefix_batch(prefixes, self.device)
        )
        guide: TermGuide | MatchGuide | None = None
        if table is not None:
            size = c.target_vocab_size
            guide = TermGuide(
                table,
                continues_word(self.tokenizer, size, self.device),
                ends_sentence=ends_sentence(self.tokenizer, size, self.device),
            )
        elif self._fuzzy is not None:  # a glossary's terms go first: a line has one guide
            matches = match_table(ids, *self._fuzzy)
            guide = None if matches is None else MatchGuide(matches.to(self.device), c.target_vocab_size)
        found = search(self.decoder, batch, self.cfg, guide, align)
        if align:  # each token's row over the source's own ids: its eos and the batch's padding left out
            for source, hyps in zip(ids, found):
                for hyp in hyps:
                    hyp.attention = [row[: len(source)] for row in hyp.attention or []]
        return found

    @functools.cached_property
    def _fuzzy(self) -> tuple[int, Tensor] | None:
        """The source id of a fuzzy-repair model's ｟fuzzy｠ and each source id's target id (-1: none), or None for
        a model trained without it (mtkit.search.matches guides the search by the match after it)."""
        piece = fuzzy_piece(self.tokenizer)
        if not piece:
            return None
        target = {name: k for k, name in enumerate(self.tokenizer.target_pieces())}
        pieces = self.tokenizer.pieces()
        return pieces.index(piece), torch.tensor([target.get(name, -1) for name in pieces], dtype=torch.long)

    def attention_ids(self, src: Ids, tgt: Ids) -> list[list[list[float]]]:
        """Per pair, the cross-attention of the model's decoder layer before the last (mtkit.model.alignment's
        choice), averaged over heads, teacher-forced over (source, target): one row per target id, one column per
        source id (eos and padding left out). One decoder pass per batch, the first model of an ensemble's; batched
        by length as search_ids batches."""
        return self._by_length(src, tgt, self._attention)

    def _by_length(self, src: Ids, tgt: Ids, run: Callable[[Ids, Ids], list[T]]) -> list[T]:
        """`run` over the (source, target) pairs in batches of like length (a target counted with its end of
        sentence) within cfg.batch_tokens, its answers given back in the pairs' order: score_ids' and
        attention_ids' one loop."""
        results: list[Any] = [[] for _ in src]
        lengths = [max(len(s), len(t) + 1) for s, t in zip(src, tgt)]
        for batch in length_batches(lengths, self.cfg.batch_tokens):
            for index, answer in zip(batch, run([src[i] for i in batch], [tgt[i] for i in batch])):
                results[index] = answer
        return results

    @torch.inference_mode()
    def _attention(self, src_ids: list[list[int]], tgt_ids: list[list[int]]) -> list[list[list[float]]]:
        c = self.model_cfg
        src, _ = pad_batch(src_ids, c.pad_id, c.eos_id, self.device)
        tgt_in = torch.full((len(tgt_ids), max(len(t) for t in tgt_ids) + 1), c.pad_id, dtype=torch.long)
        for row, tokens in enumerate(tgt_ids):  # padding after a target: the causal mask keeps it out of its rows
            tgt_in[row, : len(tokens) + 1] = torch.tensor([c.start_id, *tokens])
        weights = cross_attention_weights(self.decoder.models[0], src, tgt_in.to(self.device)).float().cpu()
        return [weights[row, : len(t), : len(s)].tolist() for row, (s, t) in enumerate(zip(src_ids, tgt_ids))]


@functools.lru_cache(maxsize=8)  # per model: the server makes a translator per batch, the tokenizer stays
def continues_word(tokenizer: Tokenizer | TableTokenizer, size: int, device: torch.device) -> Tensor:
    """[size] bool: the target pieces that continue a word (no word-start mark, a letter or digit first), which may
    not follow a glossary term's last piece; the model's rows past the pieces continue none."""
    flags = [piece[:1].isalnum() for piece in tokenizer.target_pieces()]
    return torch.tensor(flags + [False] * (size - len(flags)), dtype=torch.bool, device=device)


@functools.lru_cache(maxsize=8)
def ends_sentence(tokenizer: Tokenizer | TableTokenizer, size: int, device: torch.device) -> Tensor:
    """[size] bool: the target pieces that close a sentence (a full stop, ! or ?, alone or at a piece's end), which
    the guided search holds back while a term is unmet."""
    flags = [piece.endswith(SENTENCE_ENDS) for piece in tokenizer.target_pieces()]
    return torch.tensor(flags + [False] * (size - len(flags)), dtype=torch.bool, device=device)


def prefix_batch(prefixes: list[list[int]] | None, device: torch.device) -> Tensor | None:
    """Forced target prefixes [B, P] (-1 after a prefix's end), or None when no sentence of the batch has one."""
    if not prefixes or not any(prefixes):
        return None
    table = torch.full((len(prefixes), max(len(p) for p in prefixes)), -1, dtype=torch.long)
    for row, tokens in enumerate(prefixes):
        table[row, : len(tokens)] = torch.tensor(tokens, dtype=torch.long)
    return table.to(device)


def pad_batch(ids: list[list[int]], pad_id: int, eos_id: int, device: torch.device) -> tuple[Tensor, Tensor]:
    """src [B, S] (tokens + eos, right-padded to at least MIN_SOURCE_WIDTH, to a multiple of SOURCE_WIDTH_MULTIPLE)
    and src_lens [B] (eos excluded)."""
    width = int(round_up(max(max(len(t) for t in ids) + 1, MIN_SOURCE_WIDTH), SOURCE_WIDTH_MULTIPLE))
    src = torch.full((len(ids), width), pad_id, dtype=torch.long)
    for row, tokens in enumerate(ids):
        src[row, : len(tokens)] = torch.tensor(tokens, dtype=torch.long)
        src[row, len(tokens)] = eos_id
    return src.to(device), torch.tensor([len(t) for t in ids], device=device)


@contextmanager
def decode_threads(workers: int) -> Iterator[Callable]:
    """A `map` that runs on `workers` threads, each on 1/workers of torch's threads (restored after); the builtin
    map for one worker.

    Not the default: two workers gained little speed for more peak memory on a 2-core CPU (BENCHMARKS.md).
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
    batches: pieces make that wait short.
    """
    head, tail = batches[: len(batches) - parts], batches[len(batches) - parts :]
    pieces = [batch[i * len(batch) // parts : (i + 1) * len(batch) // parts] for batch in tail for i in range(parts)]
    return head + [piece for piece in pieces if piece]
