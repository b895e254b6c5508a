"""CTranslate2 as an engine of mtkit, without torch: search "exact" (mtkit's own) or "native" (CTranslate2's own).

exact: all `beam` finished hypotheses with raw log-prob sums (a negligible length penalty keeps the stopping rule of
CTranslate2's length-normalised search), re-ranked with mtkit's GNMT penalty; mtkit's per-sentence maximum length (a
forced, scored </s>) as mtkit.search.beam applies it, by decoding again the sentences that reach a shorter one than
their batch's; mtkit's minimum length (no </s> at the first step of a non-empty source, not renormalised) by
decoding again, with min_decoding_length (which renormalises the first step), the sentences that came back with an
empty hypothesis. This relies on CTranslate2 behaviour it does not document; tests/engines/test_ct2.py guards it.
native: one translate_batch call per batch, CTranslate2's scores and ranking as they come, min_decoding_length 1.
ctranslate2 is imported lazily.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mtkit.corpus.term_hints import term_pieces
from mtkit.engines.contract import (
    Ids,
    TermIds,
    Translating,
    check_target_lang,
    length_batches,
)
from mtkit.engines.ct2_cache import Exporter, model_directory, read_metadata
from mtkit.engines.ct2_setup import default_threads, open_model, resolve_compute_type, resolve_ct2_device
from mtkit.errors import UserError, check
from mtkit.exports.ctranslate2_library import import_ctranslate2
from mtkit.file_names import SPM_NAME, VMAP_NAME
from mtkit.search.config import MIN_LENGTH, Hypothesis, TranslateConfig, length_penalty, max_length
from mtkit.tokenizer import TableTokenizer, Tokenizer, tokenizer_from_bytes

# lp = (n + 1) ** 1e-30 rounds to 1.0, so CTranslate2's scores are raw log-prob sums; a length penalty of exactly 0
# would switch it to its unnormalised stopping rule, which ends a sentence at another step than mtkit's search.
RAW_SCORES = 1e-30
# CTranslate2 gives a beam that cannot continue (behind a forced prefix) a score of -1e10 and still returns it.
DEAD_SCORE = -1e9
# A batch takes the sentences of the next maximum length too while it holds fewer (see CT2Translator._batches).
MIN_BATCH = 32


def search_options(cfg: TranslateConfig, native: bool) -> dict[str, Any]:
    """translate_batch's search options for mtkit's settings. exact: all `beam` hypotheses with raw scores, for mtkit
    to rank; native: CTranslate2's own ranking, score / length ** alpha (alpha: cfg.length_penalty), and the n best."""
    common = {
        "min_decoding_length": MIN_LENGTH if native else 0,  # exact: see CT2Translator.search_ids
        "max_input_length": 0,
        "return_scores": True,  # mtkit allows an empty output
        "length_penalty": cfg.length_penalty if native else RAW_SCORES,
    }
    if cfg.sampling:
        return {
            **common,
            "beam_size": 1,
            "num_hypotheses": cfg.nbest,
            "sampling_topk": cfg.top_k,
            "sampling_topp": cfg.top_p,
            "sampling_temperature": cfg.temperature,
        }
    return {**common, "beam_size": cfg.beam, "num_hypotheses": cfg.nbest if native else cfg.beam}


@dataclass
class CT2Translator(Translating):  # what both engines share: Translating's own members
    """`CT2Translator.load(RUN_DIR).translate(["A man is sleeping."])`: the interface of translate.TorchTranslator."""

    model: Any  # ctranslate2.Translator
    tokenizer: Tokenizer | TableTokenizer
    cfg: TranslateConfig
    max_positions: int
    device: str
    info: dict[str, Any] = field(default_factory=dict)
    # CTranslate2 reads and writes pieces: source id -> piece, target id -> piece and back.
    pieces: list[str] = field(default_factory=list)
    target_pieces: list[str] = field(default_factory=list)
    piece_ids: dict[str, int] = field(default_factory=dict)
    native: bool = False  # CTranslate2's own search (_search_native) instead of mtkit's
    shortlist: bool = False  # search only the model's vocabulary map's candidates (use_vmap)
    suppressed: tuple[str, ...] = ()  # pieces never emitted: a run's reserved term-hint pieces (suppress_sequences)
    guides_terms: bool = field(default=False, init=False)  # no glossary terms placed by the search (search_ids)

    @classmethod
    def load(
        cls,
        path: str | Path,
        device: str = "auto",
        dtype: str = "float32",
        ensemble: list[Path] | None = None,
        threads: int = 0,
        exporter: Exporter | None = None,
        native: bool = False,
        shortlist: bool = False,
        **overrides: Any,
    ) -> CT2Translator:
        """RUN_DIR or a checkpoint (exported on first use by `exporter`, cached) or an `mtkit export` directory.

        `threads`: intra-op threads per batch (0: default_threads); cfg.workers batches decode at once.
        `exporter`: mtkit.engines.factory.EXPORT_ON_FIRST_USE (needs torch); None takes only an export or a warm cache.
        `native`: CTranslate2's own search instead of mtkit's (`--ct2-search native`).
        `shortlist`: each batch searches only the target pieces its source pieces' shortlist names (`--shortlist`).
        """
        check(not ensemble, "--ensemble: --engine ctranslate2 decodes one model; use --engine torch to ensemble")
        ctranslate2 = import_ctranslate2()
        device = resolve_ct2_device(ctranslate2, device)
        compute_type = resolve_compute_type(ctranslate2, dtype, device)
        directory = model_directory(path, exporter)
        metadata = read_metadata(directory)
        check(
            not shortlist or (directory / VMAP_NAME).is_file(),
            f"--shortlist: {path} has no shortlist; make one with `mtkit shortlist RUN_DIR DATA_DIR` "
            "(an export carries its run's)",
        )
        try:
            cfg = replace(TranslateConfig(**metadata.get("translate", metadata.get("search", {}))), **overrides)
        except TypeError as exc:  # an unknown key; a bad value is TranslateConfig's own UserError, naming it
            raise UserError(f"translate options: {exc}") from None
        check(
            cfg.early_stop,
            "translate.early_stop=false: --engine ctranslate2 stops a sentence at `beam` "
            "finished hypotheses; use --engine torch",
        )
        workers = cfg.workers if device == "cpu" else 1
        threads = threads or default_threads(workers)
        model = open_model(ctranslate2, path, exporter, directory, device, compute_type, workers, threads)
        tokenizer = tokenizer_from_bytes((directory / SPM_NAME).read_bytes(), name=str(directory / SPM_NAME))
        info = {
            "checkpoint": metadata.get("checkpoint"),
            "configs": metadata.get("configs", {}),
            "manifest": metadata.get("manifest", {}),
            "engine": "ctranslate2",
            "model_dir": str(directory),
            "compute_type": compute_type,
            "threads": threads,  # per batch: a sampled or searched line can depend on it
            "shortlist": shortlist,
        }
        check_target_lang(tokenizer, cfg.target_lang, info["manifest"])
        target = tokenizer.target_pieces()
        return cls(
            model,
            tokenizer,
            cfg,
            int(metadata["model"]["max_positions"]),
            device,
            info,
            tokenizer.pieces(),
            target,
            {piece: i for i, piece in enumerate(target)},
            native,
            shortlist,
            term_pieces(tokenizer),
        )

    @property
    def max_source_tokens(self) -> int:
        return self.max_positions - 1  # room for eos

    def describe(self) -> dict[str, Any]:
        """What serve's /info reports: the compute type; the preset and parameter count are torch's to know."""
        return {"arch": None, "parameters": None, "dtype": self.info.get("compute_type")}

    def search_ids(
        self, ids: Ids, prefixes: Ids | None = None, terms: TermIds | None = None, align: bool = False
    ) -> list[list[Hypothesis]]:
        """n-best hypotheses per id sequence (none for an empty one), in input order. `terms` is ignored: neither
        search here places glossary terms (guides_terms is False). `align`: each hypothesis keeps its attention as
        attention_ids reads it (return_attention on the search itself, no second pass).

        Every batch is submitted at once; CTranslate2 decodes `workers` of them at a time (inter_threads). exact: a
        batch decodes to its longest maximum length; the sentences that reach their own shorter maximum are decoded
        again, grouped by that maximum, at it. A sentence without a prefix that came back with an empty hypothesis
        (an </s> among the first step's best: mtkit's search, which refuses it there, goes otherwise) is decoded
        again with min_decoding_length, its scores less what CTranslate2's renormalised first step added, the
        log of 1 - p(</s>) (that empty hypothesis' score is log p(</s>)); the others' searches did not depend on
        the rule. native: _search_native.
        """
        prefixes = prefixes or [[] for _ in ids]
        results = self._search_native(ids, prefixes, align) if self.native else self._search(ids, prefixes, align)
        return self._first_rows(ids, results) if align else results

    def _search(self, ids: list[list[int]], prefixes: list[list[int]], align: bool) -> list[list[Hypothesis]]:
        """search_ids' exact search."""
        results: list[list[Hypothesis]] = [[] for _ in ids]
        offsets: dict[int, float] = {}  # what to add to CTranslate2's scores of a sentence decoded with the minimum
        todo = [(batch, steps, 0) for batch, steps in self._batches(ids, prefixes, [i for i, s in enumerate(ids) if s])]
        while todo:
            submitted = [
                (
                    batch,
                    steps,
                    least,
                    self._submit([ids[i] for i in batch], [prefixes[i] for i in batch], steps, least, align),
                )
                for batch, steps, least in todo
            ]
            again: dict[tuple[int, int], list[int]] = defaultdict(list)
            for batch, steps, least, decoded in submitted:
                for index, result in zip(batch, decoded):
                    limit, done = self._limit(ids[index], prefixes[index]), result.result()
                    empty = [s for h, s in zip(done.hypotheses, done.scores) if not h and s > DEAD_SCORE]
                    if not least and empty and not prefixes[index] and min(MIN_LENGTH, limit) > 0:
                        offsets[index] = math.log(max(-math.expm1(empty[0]), 1e-45))
                        again[(limit, MIN_LENGTH)].append(index)
                        continue
                    hyps = self._finish(ids[index], prefixes[index], done, steps, limit, offsets.get(index, 0.0))
                    if hyps is None:
                        again[(limit, least)].append(index)
                    else:
                        results[index] = hyps
            todo = [
                (batch, steps, least)
                for (_, least), group in again.items()
                for batch, steps in self._batches(ids, prefixes, group)
            ]
        return results

    def score_ids(self, src: list[list[int]], tgt: list[list[int]]) -> list[list[float]]:
        """Per-piece log-probabilities of each target and its end of sentence (score_batch adds the decoder's start
        and the end of sentence), in batches of cfg.batch_tokens tokens."""
        if not src:
            return []
        source = [[self.pieces[i] for i in s] for s in src]
        target = [[self.target_pieces[i] for i in t] for t in tgt]
        scored = self.model.score_batch(
            source, target, max_batch_size=self.cfg.batch_tokens, batch_type="tokens", max_input_length=0
        )
        return [list(result.log_probs) for result in scored]

    def attention_ids(self, src: Ids, tgt: Ids) -> list[list[list[float]]]:
        """Per pair, CTranslate2's attention of the target over the source (return_attention: its export's
        alignment layer and heads, the torch engine's: the decoder layer before the last, every head averaged), the
        target given as a forced prefix: one row per target id, one column per source id. Batches of like target
        length within cfg.batch_tokens, decoded `workers` at a time."""
        results: list[list[list[float]]] = [[] for _ in src]
        lengths = [max(len(s), len(t) + 1) if t else 0 for s, t in zip(src, tgt)]
        submitted = []
        for batch in length_batches(lengths, self.cfg.batch_tokens):
            steps = max(len(tgt[i]) for i in batch)
            submitted.append(
                (
                    batch,
                    self.model.translate_batch(
                        [[self.pieces[t] for t in src[i]] for i in batch],
                        [[self.target_pieces[t] for t in tgt[i]] for i in batch],
                        asynchronous=True,
                        beam_size=1,
                        max_decoding_length=steps,
                        return_attention=True,
                    ),
                )
            )
        for batch, decoded in submitted:
            for index, result in zip(batch, decoded):
                rows = result.result().attention[0]
                results[index] = [list(row[: len(src[index])]) for row in rows[: len(tgt[index])]]
        return results

    def _first_rows(self, ids: list[list[int]], results: list[list[Hypothesis]]) -> list[list[Hypothesis]]:
        """`results` with each kept attention's first row read again by a one-step forced pass (attention_ids):
        CTranslate2 4.8's beam search returns, for that first step only, the row of another sentence of its batch
        (the torch engine and the forced pass agree). The row is the decoder's start over the source, the same for
        every hypothesis of a sentence."""
        rows = [k for k, hyps in enumerate(results) if hyps and hyps[0].attention]
        firsts = self.attention_ids([ids[k] for k in rows], [results[k][0].tokens[:1] for k in rows])
        for k, first in zip(rows, firsts, strict=True):
            for hyp in results[k]:
                if hyp.attention:
                    hyp.attention[0] = first[0]
        return results

    def _search_native(self, ids: list[list[int]], prefixes: list[list[int]], align: bool) -> list[list[Hypothesis]]:
        """CTranslate2's own search: batches of length-sorted sentences within cfg.batch_tokens
        (mtkit.engines.streaming's length_batches; those with a prefix apart, as in _batches), one translate_batch call
        each, decoded to the batch's longest maximum length (CTranslate2 takes one per call); its n best as it ranks
        them."""
        batches = [
            batch
            for with_prefix in (False, True)
            for batch in length_batches(
                [len(s) if bool(p) == with_prefix else 0 for s, p in zip(ids, prefixes)], self.cfg.batch_tokens
            )
        ]
        submitted = [
            (
                batch,
                self._submit(
                    [ids[i] for i in batch],
                    [prefixes[i] for i in batch],
                    max(self._limit(ids[i], prefixes[i]) for i in batch),
                    align=align,
                ),
            )
            for batch in batches
        ]
        results: list[list[Hypothesis]] = [[] for _ in ids]
        for batch, decoded in submitted:
            for index, result in zip(batch, decoded):
                results[index] = self._native_hypotheses(result.result(), len(ids[index]))
        return results

    def _native_hypotheses(self, result: Any, sources: int) -> list[Hypothesis]:
        """CTranslate2's hypotheses of one sentence in its order; its score is the log-prob sum / length ** alpha
        (no </s> in the length, nor in the sum of one cut at the maximum length). A beam that died behind a prefix
        (a sum of about -1e10) is no hypothesis."""
        alpha, hyps = self.cfg.length_penalty, []
        for tokens, score, weights in zip(self._ids(result.hypotheses), result.scores, _attention(result, sources)):
            logprob = score * len(tokens) ** alpha if tokens else score  # an empty one scores -inf at alpha > 0
            if logprob > DEAD_SCORE:
                hyps.append(Hypothesis(tokens, score, logprob, weights))
        return hyps

    def _batches(
        self, ids: list[list[int]], prefixes: list[list[int]], among: list[int]
    ) -> list[tuple[list[int], int]]:
        """(indices, decoding steps) of the batches of `among`: sentences of one maximum length, neighbouring
        maxima merged while a batch holds fewer than MIN_BATCH sentences, each within cfg.batch_tokens.

        Grouping by maximum keeps batches as small as a bare CTranslate2 script's when there are many sentences
        (half the memory of mixed 4,000-token batches, at the same speed); merging keeps a server's few
        concurrent lines in one call (twice the throughput of one call per maximum). Those with a prefix are kept
        apart from those without: CTranslate2 treats the first step of a call with prefixes differently even for
        a sentence without one.
        """
        keyed = sorted((bool(prefixes[i]), self._limit(ids[i], prefixes[i]), len(ids[i]), i) for i in among)
        batches: list[tuple[list[int], int]] = []
        current: list[int] = []
        kind, steps, width = False, 0, 0
        for has_prefix, limit, length, index in keyed:
            if current and (
                has_prefix != kind
                or (len(current) + 1) * max(width, length + 1) > self.cfg.batch_tokens
                or (limit != steps and len(current) >= MIN_BATCH)
            ):
                batches.append((current, steps))
                current, width = [], 0
            current.append(index)
            kind, steps, width = has_prefix, limit, max(width, length + 1)
        return batches + [(current, steps)] if current else batches

    def _limit(self, src: list[int], prefix: list[int]) -> int:
        """mtkit's maximum output length of a sentence; a longer forced prefix raises it to the prefix's length."""
        cfg = self.cfg
        return max(max_length(len(src), cfg.max_len_a, cfg.max_len_b, self.max_positions), len(prefix))

    def _submit(
        self, ids: list[list[int]], prefixes: list[list[int]], steps: int, least: int = 0, align: bool = False
    ) -> list[Any]:
        """Start decoding a batch at `steps` decoding steps, at least `least` (exact: 0 or MIN_LENGTH, native: its
        own), keeping each hypothesis's attention where asked to `align`; asynchronous results."""
        source = [[self.pieces[i] for i in s] for s in ids]
        target = [[self.target_pieces[i] for i in p] for p in prefixes] if any(prefixes) else None
        if self.cfg.sampling:  # the same draws for the same batch and seed, as mtkit's sampling
            import_ctranslate2().set_random_seed(self.cfg.seed)
        # CTranslate2 needs at least one step: a sentence whose maximum is 0 gets its forced </s> in _finish.
        return self.model.translate_batch(
            source,
            target,
            asynchronous=True,
            max_decoding_length=max(steps, 1),
            use_vmap=self.shortlist,
            return_attention=align,
            **({"suppress_sequences": [[piece] for piece in self.suppressed]} if self.suppressed else {}),
            **search_options(self.cfg, self.native) | ({"min_decoding_length": least} if least else {}),
        )

    def _finish(
        self, src: list[int], prefix: list[int], result: Any, steps: int, limit: int, offset: float = 0.0
    ) -> list[Hypothesis] | None:
        """mtkit's n-best of one sentence from CTranslate2's hypotheses decoded at `steps` steps, `offset` added to
        CTranslate2's scores; None when the sentence must be decoded again at its own maximum length `limit`.

        A hypothesis shorter than the sentence's maximum ended by itself, as in mtkit. One that reached the maximum
        would have had </s> forced and scored there: when the decoding stopped at the sentence's own maximum, it is
        scored with </s> (score_batch); otherwise (a batch's longer maximum) the sentence is decoded again.
        """
        if limit == 0:  # mtkit forces </s> at the first step
            return self._rank([[]], self._score_with_eos(src, [[]], prefix))
        # A beam that died (CTranslate2 scores it about -1e10: behind a forced prefix) is no hypothesis.
        alive = [
            (h, s, a)
            for h, s, a in zip(result.hypotheses, result.scores, _attention(result, len(src)))
            if s > DEAD_SCORE
        ]
        if steps != limit and any(len(h) >= limit for h, _, _ in alive):
            return None
        ids = self._ids([h for h, _, _ in alive])
        logprobs = [s + offset for _, s, _ in alive]
        cut = [k for k, h in enumerate(ids) if len(h) >= limit]
        for k, scored in zip(cut, self._score_with_eos(src, [ids[k] for k in cut], prefix)):
            logprobs[k] = scored
        return self._rank(ids, logprobs, [a for _, _, a in alive])

    def _ids(self, hypotheses: list[list[str]]) -> list[list[int]]:
        return [[self.piece_ids[piece] for piece in h] for h in hypotheses]

    def _score_with_eos(self, src: list[int], targets: list[list[int]], prefix: list[int]) -> list[float]:
        """Log-prob sums of `targets` followed by </s> (score_batch adds it), as mtkit scores a forced </s>; the
        prefix's tokens count nothing, as in the search."""
        if not targets:
            return []
        source = [[self.pieces[i] for i in src]] * len(targets)
        scored = self.model.score_batch(
            source, [[self.target_pieces[i] for i in t] for t in targets], max_input_length=0
        )
        return [sum(s.log_probs[len(prefix) :]) for s in scored]

    def _rank(
        self, ids: list[list[int]], logprobs: list[float], attention: list[Any] | None = None
    ) -> list[Hypothesis]:
        """The n best by mtkit's score, logprob / lp(|Y| + 1); a stable sort keeps CTranslate2's order on ties."""
        alpha, attention = self.cfg.length_penalty, attention or [None] * len(ids)
        hyps = [
            Hypothesis(h, lp / length_penalty(len(h) + 1, alpha), lp, a)
            for h, lp, a in zip(ids, logprobs, attention, strict=True)
        ]
        return sorted(hyps, key=lambda h: -h.score)[: self.cfg.nbest]


def _attention(result: Any, sources: int) -> list[list[list[float]] | None]:
    """Per hypothesis of a translate_batch result, its attention (return_attention) as attention_ids gives it: a row
    per output id, a column per source id (the source's end of sentence left out); None each where none was asked."""
    if not result.attention:
        return [None] * len(result.hypotheses)
    return [
        [list(row[:sources]) for row in rows[: len(tokens)]]
        for tokens, rows in zip(result.hypotheses, result.attention, strict=True)
    ]
