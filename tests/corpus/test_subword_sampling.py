"""Subword regularization (mtkit.corpus.subword_sampling): BPE-dropout gives sentencepiece's own segmentation back when
nothing is dropped; sampled segmentations spell the same text, differ more with a larger alpha, are a function of
the batch seed alone (whichever thread or process draws them), and keep the ids preprocess put before the
sentence."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from mtkit.corpus.subword_sampling import SubwordSampler, SubwordSampling, batch_seed
from mtkit.errors import UserError
from mtkit.tokenizer import Tokenizer
from tests.conftest import read_gz_lines


@pytest.fixture(scope="module")
def tokenizer(multi30k_spm: Path) -> Tokenizer:
    return Tokenizer.load(multi30k_spm)


@pytest.fixture(scope="module")
def ids(tokenizer: Tokenizer, multi30k: Path) -> list[np.ndarray]:
    lines = read_gz_lines(multi30k / "val.de.gz", 200)
    return [np.asarray(seq, dtype=np.uint16) for seq in tokenizer.encode(lines)]


def sampler(tokenizer: Tokenizer, alpha: float, max_len: int = 1024) -> SubwordSampler:
    return SubwordSampler(tokenizer.to_bytes(), SubwordSampling(alpha), max_len)


def changed(a: list[np.ndarray], b: list[np.ndarray]) -> int:
    return sum(not np.array_equal(x, y) for x, y in zip(a, b))


def test_without_dropout_the_merges_give_sentencepieces_segmentation(tokenizer: Tokenizer, ids: list) -> None:
    assert changed(ids, sampler(tokenizer, 1e-12).resample(ids, [0] * len(ids), seed=1)) == 0


def test_sampled_segmentations_spell_the_same_text_and_differ_more_with_alpha(tokenizer: Tokenizer, ids: list) -> None:
    keep = [0] * len(ids)
    low = sampler(tokenizer, 0.05).resample(ids, keep, seed=1)
    high = sampler(tokenizer, 0.3).resample(ids, keep, seed=1)
    texts = tokenizer.decode([seq.tolist() for seq in ids])
    assert tokenizer.decode([seq.tolist() for seq in low]) == texts
    assert tokenizer.decode([seq.tolist() for seq in high]) == texts
    assert 20 < changed(ids, low) < changed(ids, high)
    assert sum(map(len, high)) > sum(map(len, low)) > sum(map(len, ids))  # dropped merges: more, shorter pieces
    assert all(seq.dtype == np.uint16 for seq in high)


def test_the_draws_are_a_function_of_the_batch_seed_on_any_thread(tokenizer: Tokenizer, ids: list) -> None:
    keep = [0] * len(ids)
    first = sampler(tokenizer, 0.1).resample(ids, keep, seed=batch_seed(1, 0, 5))
    on_thread: list = []
    other = sampler(tokenizer, 0.1)

    def draw() -> None:  # a long-lived thread: its generator reseeded for each batch, not only at its first draw
        other.resample(ids, keep, seed=batch_seed(1, 0, 6))
        on_thread.append(other.resample(ids, keep, seed=batch_seed(1, 0, 5)))

    thread = threading.Thread(target=draw)
    thread.start()
    thread.join()
    assert changed(first, on_thread[0]) == 0
    assert changed(first, sampler(tokenizer, 0.1).resample(ids, keep, seed=batch_seed(1, 0, 6))) > 20
    assert len({batch_seed(1, 0, 5), batch_seed(1, 0, 6), batch_seed(2, 0, 5), batch_seed(1, 1, 5)}) == 4


def test_a_seed_draws_the_same_in_another_process(tokenizer: Tokenizer, ids: list, multi30k_spm: Path) -> None:
    """The property resume after kill -9 needs (sentencepiece's own sampling lacks it)."""
    here = sampler(tokenizer, 0.1).resample(ids[:50], [0] * 50, seed=batch_seed(1, 2, 3))
    script = (
        "import sys, numpy as np\nfrom mtkit.corpus.subword_sampling import SubwordSampler, SubwordSampling\n"
        "from mtkit.tokenizer import Tokenizer\n"
        f"tok = Tokenizer.load({str(multi30k_spm)!r})\n"
        "ids = [np.asarray(s, dtype=np.uint16) for s in eval(sys.stdin.read())]\n"
        "out = SubwordSampler(tok.to_bytes(), SubwordSampling(0.1), 1024).resample(ids, [0] * len(ids), "
        f"{batch_seed(1, 2, 3)})\nprint([s.tolist() for s in out])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=str([s.tolist() for s in ids[:50]]),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert eval(done.stdout) == [s.tolist() for s in here] and changed(ids[:50], here) > 5


def test_leading_ids_are_kept_and_an_overlong_sample_keeps_the_stored_segmentation(
    tokenizer: Tokenizer, ids: list
) -> None:
    tagged = [np.concatenate([np.asarray([7, 9], dtype=np.uint16), seq]) for seq in ids]
    out = sampler(tokenizer, 0.3).resample(tagged, [2] * len(tagged), seed=3)
    assert all(seq[:2].tolist() == [7, 9] for seq in out) and changed(tagged, out) > 20
    longest = max(map(len, tagged))
    capped = sampler(tokenizer, 0.3, max_len=longest).resample(tagged, [2] * len(tagged), seed=3)
    assert all(len(seq) <= longest for seq in capped)
    assert any(
        np.array_equal(seq, orig) and not np.array_equal(seq, free) for seq, orig, free in zip(capped, tagged, out)
    )


def test_settings_are_checked() -> None:
    with pytest.raises(UserError, match=r"train.subword_alpha must be in \(0, 1\]"):
        SubwordSampling(0.0)
    with pytest.raises(UserError, match="train.subword_sides must be both or source"):
        SubwordSampling(0.1, sides="target")
