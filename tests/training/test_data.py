"""What training reads of a data directory: one corpus as is, several as a MixedData with their weights (the recipe's
and train.corpus_weights replacing the manifest's), a valid set per pair; a tagged corpus's tag reaches the batches
the model sees; a bad weight is one line before the run directory is touched."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from mtkit.corpus.batching import epoch_batches
from mtkit.corpus.binarized import MixedData, ParallelData, prefetch_groups, read_manifest
from mtkit.corpus.mixing import epoch_draw
from mtkit.corpus.modifiers import BatchModifier, ModifiersConfig
from mtkit.corpus.subword_sampling import BatchResampler
from mtkit.errors import UserError
from mtkit.recipe import resolve_recipe
from mtkit.tokenizer import TableTokenizer, Tokenizer
from mtkit.training.data import batch_resampler, open_training_data, subword_resampler


def train_cfg(*overrides: str):
    return resolve_recipe(None, "tiny", list(overrides), vocab_size=600).train


def test_one_corpus_is_read_as_is(small_data: Path) -> None:
    opened = open_training_data(small_data, read_manifest(small_data), None, train_cfg(), True)
    assert isinstance(opened.data, ParallelData) and opened.mixture is None and list(opened.valid) == ["en-de"]


def test_several_corpora_are_drawn_by_their_weights(multilingual_data: Path) -> None:
    manifest = read_manifest(multilingual_data)
    opened = open_training_data(multilingual_data, manifest, None, train_cfg(), True)
    assert isinstance(opened.data, MixedData) and opened.mixture is not None
    assert (opened.mixture.names, opened.mixture.counts.tolist()) == (["de", "fr"], [120, 240])  # 360 pairs as 1:2
    assert sorted(opened.valid) == ["en-de", "en-fr"]
    recipe = [{"name": "de", "weight": 3.0}, {"name": "fr"}]  # the recipe given to `mtkit train --config`
    assert open_training_data(multilingual_data, manifest, recipe, train_cfg(), True).mixture.counts.tolist() == [
        270,
        90,
    ]
    cfg = train_cfg("train.corpus_weights={'fr': 3.0}")
    assert open_training_data(multilingual_data, manifest, recipe, cfg, True).mixture.counts.tolist() == [180, 180]
    cfg = train_cfg("train.sampling='temperature'", "train.sampling_temperature=1e9")  # flat over the two pairs
    assert open_training_data(multilingual_data, manifest, None, cfg, True).mixture.counts.tolist() == [180, 180]
    with pytest.raises(UserError, match="no corpus 'es'"):
        open_training_data(multilingual_data, manifest, None, train_cfg("train.corpus_weights={'es': 1.0}"), True)


def test_the_tag_reaches_the_batches_the_model_sees(multilingual_data: Path) -> None:
    """Each source starts with its target-language token; the tagged corpus's sources then carry the tag, in the
    batches that training collates from the epoch's draw."""
    manifest = read_manifest(multilingual_data)
    pieces = {piece: i for i, piece in enumerate(Tokenizer.load(multilingual_data / "spm.model").pieces())}
    de, fr, tag = pieces[">>de<<"], pieces[">>fr<<"], pieces["<bt>"]
    opened = open_training_data(multilingual_data, manifest, None, train_cfg(), True)
    batches = epoch_batches(
        opened.data.src_lens, opened.data.tgt_lens, 512, 1, 1, drawn=epoch_draw(opened.mixture, 1, 1)
    )
    seen = {"de": 0, "fr": 0}
    for (batch,), indices in zip(prefetch_groups(opened.data, batches, 0, 1, torch.device("cpu")), batches):
        from_fr = np.asarray(indices) >= manifest["corpora"]["de"]["pairs"]
        src = batch.src.numpy()
        assert (src[~from_fr, 0] == de).all() and (src[~from_fr, 1] != tag).all()
        assert (src[from_fr, 0] == fr).all() and (src[from_fr, 1] == tag).all()
        seen["de"] += int((~from_fr).sum())
        seen["fr"] += int(from_fr.sum())
    assert seen == {"de": 120, "fr": 240}


def test_subword_regularization_segments_batches_again_behind_the_kept_tokens(multilingual_data: Path) -> None:
    """train.subword_alpha: the collated sentences spell the stored text in other pieces, behind the language token
    and tag kept in place; a batch's draws depend on (seed, epoch, position) alone; off, nothing is resampled."""
    manifest = read_manifest(multilingual_data)
    tokenizer = Tokenizer.load(multilingual_data / "spm.model")
    opened = open_training_data(multilingual_data, manifest, None, train_cfg(), True)
    assert subword_resampler(multilingual_data, manifest, train_cfg(), 255, 0) is None
    resample = subword_resampler(multilingual_data, manifest, train_cfg("train.subword_alpha=0.3"), 255, 0)
    assert resample is not None and resample.leads.tolist() == [1] * 240 + [2] * 120  # >>de<<; >>fr<< and <bt>
    batches = epoch_batches(
        opened.data.src_lens, opened.data.tgt_lens, 512, 1, 1, drawn=epoch_draw(opened.mixture, 1, 1)
    )

    def collated(epoch: int) -> list:
        draw = lambda *args: resample(*args, epoch=epoch)  # noqa: E731
        return [group[0] for group in prefetch_groups(opened.data, batches, 0, 1, torch.device("cpu"), resample=draw)]

    plain = [group[0] for group in prefetch_groups(opened.data, batches, 0, 1, torch.device("cpu"))]
    first, again, other = collated(1), collated(1), collated(2)
    changed = 0
    for stored, sampled, indices in zip(plain, first, batches):
        tagged = torch.from_numpy(np.asarray(indices) >= manifest["corpora"]["de"]["pairs"])
        assert torch.equal(stored.src[:, 0], sampled.src[:, 0]) and torch.equal(
            stored.src[tagged, 1], sampled.src[tagged, 1]
        )
        for side in ("src", "tgt_out"):
            texts = [tokenizer.decode([[i for i in row if i > 3]])[0] for row in getattr(stored, side).tolist()]
            assert [
                tokenizer.decode([[i for i in row if i > 3]])[0] for row in getattr(sampled, side).tolist()
            ] == texts
        changed += int(not torch.equal(stored.src, sampled.src)) + int(not torch.equal(stored.tgt_out, sampled.tgt_out))
    assert changed > len(batches)  # both sides change
    assert all(torch.equal(a.src, b.src) and torch.equal(a.tgt_in, b.tgt_in) for a, b in zip(first, again))
    assert any(not torch.equal(a.src, b.src) for a, b in zip(first, other))
    with pytest.raises(UserError, match=r"subword_alpha must be in \[0, 1\]"):
        train_cfg("train.subword_alpha=-0.1")


def test_modifiers_come_before_subword_sampling_behind_the_kept_tokens(tmp_path: Path, multilingual_data: Path) -> None:
    """[modifiers] and train.subword_alpha: the batch's text is modified first (merged lines keep their first pair's
    language token and tag), then segmented again, spelling the same text; neither on: None; an imported vocabulary
    is one line naming the field."""
    manifest = read_manifest(multilingual_data)
    tokenizer = Tokenizer.load(multilingual_data / "spm.model")
    assert batch_resampler(multilingual_data, manifest, train_cfg(), ModifiersConfig(), 255, 0) is None
    modifiers = ModifiersConfig(upper_case=1.0, merge=1.0)  # drawn per batch: this batch is merged, in capitals
    resample = batch_resampler(multilingual_data, manifest, train_cfg("train.subword_alpha=0.3"), modifiers, 255, 0)
    assert isinstance(resample, BatchModifier) and isinstance(resample.then, BatchResampler)
    opened = open_training_data(multilingual_data, manifest, None, train_cfg(), True)
    indices = epoch_batches(
        opened.data.src_lens, opened.data.tgt_lens, 512, 1, 1, drawn=epoch_draw(opened.mixture, 1, 1)
    )[0]
    src, tgt = [opened.data.src(i) for i in indices], [opened.data.tgt(i) for i in indices]
    modified_src, modified_tgt, rows = resample.modify(src, tgt, indices, 0, 1)
    sampled_src, sampled_tgt = resample(src, tgt, indices, 0, 1)
    assert len(sampled_src) == len(rows) < len(indices) and any(
        not np.array_equal(a, b) for a, b in zip(src, sampled_src)
    )
    texts = []
    for lead, modified, sampled in zip(resample.leads[rows], modified_src, sampled_src):
        assert np.array_equal(modified[:lead], sampled[:lead])
        texts.append(tokenizer.decode([modified[lead:].tolist(), sampled[lead:].tolist()]))
    texts += [tokenizer.decode([a.tolist(), b.tolist()]) for a, b in zip(modified_tgt, sampled_tgt)]
    assert all(a == b for a, b in texts) and any(a.isupper() for a, _ in texts)
    imported = tmp_path / "imported"
    imported.mkdir()
    model = tokenizer.to_bytes()
    (imported / "spm.model").write_bytes(TableTokenizer(model, model, tokenizer.pieces()).to_bytes())
    with pytest.raises(
        UserError, match=r"^modifiers.typos: .*spm.model is an imported vocabulary, not a sentencepiece"
    ):
        batch_resampler(imported, manifest, train_cfg(), ModifiersConfig(typos=0.1), 255, 0)


def test_a_bad_weight_is_one_line_and_writes_nothing(tmp_path: Path, multilingual_data: Path) -> None:
    for weights, message in (
        ("{'fr': 0.0}", "error: corpus fr: weight must be positive, got 0.0 (train.corpus_weights)"),
        ("{'es': 1.0}", "error: train.corpus_weights: no corpus 'es' in the data (its corpora: de, fr)"),
    ):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "mtkit",
                "train",
                str(multilingual_data),
                "--save-dir",
                str(tmp_path / "run"),
                "--arch",
                "tiny",
                "--set",
                f"train.corpus_weights={weights}",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 2 and done.stderr.strip().splitlines() == [message], done.stderr
        assert not (tmp_path / "run").exists()
