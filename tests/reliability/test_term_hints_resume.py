"""Term hints are exact across kill -9: a run with [term_hints] (and modifiers) on, killed mid-epoch, resumed by the
same command, ends with the weights and Adam moments of a run never stopped (float32 CPU, dropout on): the hints of a
batch are a function of (train.seed, epoch, rank, batch position) and the alignments kept with the data alone. Data
preprocessed without the reserved pieces is refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from mtkit.corpus.binarized import read_manifest
from mtkit.errors import UserError
from mtkit.runs.checkpoint import load_checkpoint
from mtkit.runs.checkpoint_files import list_checkpoints
from mtkit.training.data import batch_resampler
from mtkit.training.loop import train
from tests.conftest import preprocess_hinted
from tests.reliability.common import Trainer, differing_tensors, newest_step, train_command
from tests.reliability.conftest import tiny_recipe

STEPS, KILL_AT = 12, 9
HINT_SETS = (
    "term_hints.probability=0.5",
    "term_hints.max_terms=3",
    "term_hints.replace=0.2",
    "modifiers.upper_case=0.1",
    "modifiers.typos=0.1",
    "modifiers.merge=0.1",
    "train.save_interval_steps=5",
)


@pytest.fixture(scope="module")
def hinted_data(tmp_path_factory: pytest.TempPathFactory, multi30k: Path) -> Path:
    pytest.importorskip("eflomal")
    return preprocess_hinted(tmp_path_factory.mktemp("hinted") / "data", multi30k, 1500)


@pytest.mark.exactness
def test_term_hints_resume_exactly_after_kill9(tmp_path: Path, hinted_data: Path) -> None:
    from mtkit.faults import FAULTS_ENV

    train(hinted_data, tmp_path / "reference", tiny_recipe(f"train.max_steps={STEPS}", *HINT_SETS))
    run = tmp_path / "killed"
    command = train_command(hinted_data, run, STEPS, *HINT_SETS)
    killed = Trainer(command, env={FAULTS_ENV: f"kill_rank_at=0:{KILL_AT}"})
    assert killed.finish() == -9 and killed.steps[-1] == KILL_AT - 1, killed.stderr[-3000:]
    assert newest_step(run) == 5
    resumed = Trainer(command)
    assert resumed.finish() == 0, resumed.stderr[-3000:]
    assert resumed.steps[0] == 6
    final, expected = (load_checkpoint(list_checkpoints(path)[-1]) for path in (run, tmp_path / "reference"))
    assert final["step"] == expected["step"] == STEPS
    assert not differing_tensors(final["model"], expected["model"])
    assert not differing_tensors(final["optimizer"], expected["optimizer"])


def test_the_hints_are_on_and_data_without_their_pieces_is_refused(hinted_data: Path, small_data: Path) -> None:
    recipe = tiny_recipe(*HINT_SETS)
    on = batch_resampler(
        hinted_data, read_manifest(hinted_data), recipe.train, recipe.modifiers, 255, 0, recipe.term_hints
    )
    assert on.hints is not None and on.hints.cfg.probability == 0.5
    with pytest.raises(UserError, match=r"^term_hints\.probability: .*spm\.model has no pieces __source__"):
        batch_resampler(
            small_data, read_manifest(small_data), recipe.train, recipe.modifiers, 255, 0, recipe.term_hints
        )
