"""What a training run reads from DATA_DIR: its training corpora (one split as is; several as one MixedData that each
epoch draws from, mtkit.corpus.mixing) with the weights the run uses, one valid set per language pair, and what
collation does to each training batch (modifiers, term hints, subword regularization). Opens and checks only: the loop,
batching and validation are elsewhere (mtkit.training.loop, mtkit.training.step).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mtkit.console import log
from mtkit.corpus.binarized import MixedData, ParallelData, split_languages, training_corpora, valid_splits
from mtkit.corpus.mixing import Mixture, plan_mixture, resolve_weights
from mtkit.corpus.modifiers import BatchModifier, ModifiersConfig, TermHints
from mtkit.corpus.subword_sampling import BatchResampler, SubwordSampler, SubwordSampling
from mtkit.corpus.term_alignments import TermLinks, ensure_alignments, source_lead
from mtkit.corpus.term_hints import TERM_PIECES, TermHintsConfig, term_pieces
from mtkit.errors import check
from mtkit.file_names import SPM_NAME
from mtkit.tokenizer import Tokenizer, tokenizer_from_bytes


@dataclass
class TrainingData:
    data: ParallelData | MixedData
    mixture: Mixture | None  # None: one corpus, read as is
    valid: dict[str, ParallelData]  # language pair "src-tgt" -> its valid set
    resample: BatchModifier | BatchResampler | None = None  # what collation does to a batch (batch_resampler)


def open_training_data(
    data_dir: Path, manifest: dict, recipe_corpora: list[dict[str, Any]] | None, cfg: Any, is_main: bool
) -> TrainingData:
    """Map the corpora and valid sets of `data_dir`; `recipe_corpora` are the run's recipe's [[preprocess.corpora]]
    (their weights replace the manifest's), `cfg` the TrainConfig (sampling, temperature, corpus_weights). Every
    check happens here, before the run directory is touched."""
    corpora = training_corpora(manifest)
    weights = resolve_weights(corpora, recipe_corpora, cfg.corpus_weights)
    if not corpora:  # the reader's own error names the missing split
        ParallelData.open(data_dir, "train", manifest["source_lang"], manifest["target_lang"])
    parts = [
        ParallelData.open(data_dir, entry["split"], entry["source_lang"], entry["target_lang"])
        for entry in corpora.values()
    ]
    mixture = plan_mixture(corpora, weights, cfg.sampling, cfg.sampling_temperature)
    if mixture is not None and is_main:
        shares = ", ".join(
            f"{name} {size:,} x {weights[name]:g} -> {count:,}"
            for name, size, count in zip(mixture.names, mixture.sizes, mixture.counts)
        )
        how = f"temperature {cfg.sampling_temperature:g}" if cfg.sampling == "temperature" else "weights"
        log(f"{len(parts)} corpora by {how}, pairs per epoch: {shares}")
    valid = {
        pair: ParallelData.open(data_dir, split, *split_languages(manifest, split))
        for pair, split in valid_splits(manifest).items()
    }
    return TrainingData(parts[0] if mixture is None else MixedData(parts), mixture, valid)


def subword_resampler(data_dir: Path, manifest: dict, cfg: Any, max_len: int, rank: int) -> BatchResampler | None:
    """Subword regularization of the training batches when train.subword_alpha > 0 (None otherwise): the run's
    sentencepiece model, and per training sentence the ids preprocess put before it (language token, corpus tag),
    in the order of the training data (the corpora as training_corpora lists them)."""
    if cfg.subword_alpha == 0:
        return None
    sampling = SubwordSampling(cfg.subword_alpha, cfg.subword_sides)
    spm_model = _bpe_model(data_dir, "train.subword_alpha")
    return BatchResampler(SubwordSampler(spm_model, sampling, max_len), _leads(manifest), cfg.seed, rank)


def batch_resampler(
    data_dir: Path,
    manifest: dict,
    cfg: Any,
    modifiers: ModifiersConfig,
    max_len: int,
    rank: int,
    term_hints: TermHintsConfig | None = None,
) -> BatchModifier | BatchResampler | None:
    """What collation does to each training batch: the [modifiers] and the [term_hints] first
    (mtkit.corpus.modifiers), then subword regularization (subword_resampler); None when none is on. `cfg` is the
    TrainConfig."""
    resample = subword_resampler(data_dir, manifest, cfg, max_len, rank)
    hinted = term_hints is not None and term_hints.enabled
    enabled = modifiers.enabled() + (["term_hints.probability"] if hinted else [])
    if not enabled:
        return resample
    field = enabled[0] if hinted and len(enabled) == 1 else f"modifiers.{enabled[0]}"
    tokenizer = Tokenizer.from_bytes(_bpe_model(data_dir, field))
    hints = _term_hints(data_dir, manifest, term_hints, tokenizer) if hinted else None
    return BatchModifier(tokenizer, modifiers, _leads(manifest), cfg.seed, rank, max_len, resample, hints)


def _term_hints(data_dir: Path, manifest: dict, cfg: TermHintsConfig, tokenizer: Tokenizer) -> TermHints:
    """The term hints of a data directory preprocessed for them (its sentencepiece model holds the reserved
    pieces); its alignments made now where a killed preprocess left them undone (each rank makes the same files,
    written atomically)."""
    pieces = term_pieces(tokenizer)
    check(
        bool(pieces),
        f"term_hints.probability: {data_dir / SPM_NAME} has no pieces {', '.join(TERM_PIECES)}; preprocess again "
        "with the recipe's [term_hints] on (mtkit preprocess --config RECIPE)",
    )
    seed = manifest.get("options", {}).get("seed", 1)
    ensure_alignments(data_dir, manifest, seed)
    return TermHints(cfg, TermLinks(data_dir, manifest, seed), pieces)


def _bpe_model(data_dir: Path, field: str) -> bytes:
    """The run's sentencepiece model; an imported vocabulary (a table tokenizer) is refused naming `field`."""
    spm_model = (data_dir / SPM_NAME).read_bytes()
    check(
        isinstance(tokenizer_from_bytes(spm_model), Tokenizer),
        f"{field}: {data_dir / SPM_NAME} is an imported vocabulary, not a sentencepiece BPE model",
    )
    return spm_model


def _leads(manifest: dict) -> np.ndarray:
    """Per training sentence, in the order of the training data (the corpora as training_corpora lists them): how
    many ids preprocess put before its source (language token, corpus tag)."""
    leads = [
        np.full(entry["pairs"], source_lead(manifest, entry), dtype=np.int64)
        for entry in training_corpora(manifest).values()
    ]
    return np.concatenate(leads)
