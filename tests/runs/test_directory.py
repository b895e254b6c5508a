"""mtkit.runs.directory: what a run directory refuses (other data, another architecture or tokenizer), what opening it
writes, and metrics.jsonl as one history after a resume. Plain files; no training."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mtkit.errors import UserError
from mtkit.file_names import CONFIG_NAME, MANIFEST_NAME, METRICS_NAME, SPM_NAME
from mtkit.runs.directory import (
    MetricsLog,
    check_compatible,
    open_run,
)

MANIFEST = {
    "source_lang": "en",
    "target_lang": "de",
    "vocab_size": 1000,
    "spm_sha256": "a" * 64,
    "splits": {"train": {"pairs": 10}},
    "created": "not part of the data's identity",
}
MODEL = {
    "d_model": 64,
    "n_heads": 2,
    "d_ff": 128,
    "encoder_layers": 2,
    "decoder_layers": 2,
    "vocab_size": 1000,
    "dropout": 0.1,
}
RECIPE = {"model": MODEL, "train": {"lr": 1e-3}}


def opened(tmp_path: Path) -> Path:
    data, run = tmp_path / "data", tmp_path / "run"
    data.mkdir()
    (data / SPM_NAME).write_bytes(b"spm bytes")
    assert open_run(run, data, RECIPE, MANIFEST, is_main=True, found=None) is None
    return run


def test_opening_writes_the_recipe_manifest_and_tokenizer(tmp_path: Path) -> None:
    run = opened(tmp_path)
    assert json.loads((run / CONFIG_NAME).read_text()) == RECIPE
    assert json.loads((run / MANIFEST_NAME).read_text()) == MANIFEST
    assert (run / SPM_NAME).read_bytes() == b"spm bytes"


def test_other_data_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    run = opened(tmp_path)
    check_compatible(run, RECIPE, {**MANIFEST, "created": "later"}, None)  # not the data's identity: accepted
    before = (run / MANIFEST_NAME).read_text()
    with pytest.raises(UserError, match="other data or another sentencepiece model"):
        open_run(run, tmp_path / "data", RECIPE, {**MANIFEST, "vocab_size": 2000}, is_main=True, found=None)
    assert (run / MANIFEST_NAME).read_text() == before


def test_a_drop_reason_added_later_keeps_the_same_data_compatible(tmp_path: Path) -> None:
    """A run made before preprocess counted a reason (its manifest lacks the key) resumes on the same data preprocessed
    again, where the new reason counts 0; a reason that dropped pairs makes the data another."""
    run, data = tmp_path / "run", tmp_path / "data"
    data.mkdir()
    (data / SPM_NAME).write_bytes(b"spm bytes")
    old = {**MANIFEST, "splits": {"train": {"pairs": 10, "dropped": {"empty": 2, "ratio": 0}}}}
    open_run(run, data, RECIPE, old, is_main=True, found=None)
    again = {**MANIFEST, "splits": {"train": {"pairs": 10, "dropped": {"empty": 2, "ratio": 0, "wrong_language": 0}}}}
    check_compatible(run, RECIPE, again, None)
    filtered = {**MANIFEST, "splits": {"train": {"pairs": 7, "dropped": {"empty": 2, "wrong_language": 3}}}}
    with pytest.raises(UserError, match="other data"):
        check_compatible(run, RECIPE, filtered, None)


def test_a_checkpoint_of_another_architecture_or_tokenizer_is_refused(tmp_path: Path) -> None:
    run = opened(tmp_path)
    payload = {"configs": {"model": MODEL}, "spm_sha256": MANIFEST["spm_sha256"]}
    check_compatible(run, RECIPE, MANIFEST, payload)
    with pytest.raises(UserError, match=r"architecture differs .*d_model=64 vs 128"):
        check_compatible(run, {**RECIPE, "model": {**MODEL, "d_model": 128}}, MANIFEST, payload)
    with pytest.raises(UserError, match="sentencepiece model differs"):
        check_compatible(run, RECIPE, MANIFEST, {**payload, "spm_sha256": "b" * 64})


def test_metrics_after_the_resumed_step_are_dropped_and_a_cut_line_too(tmp_path: Path) -> None:
    path = tmp_path / METRICS_NAME
    records = [{"step": step, "loss": 1.0} for step in (50, 100, 150)]
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + '{"step": 200, "lo')  # killed mid-line
    log = MetricsLog(tmp_path, enabled=True, start_wall=12.0, start_step=100)
    assert [json.loads(line)["step"] for line in path.read_text().splitlines()] == [50, 100]
    seen: list[dict] = []
    log.monitor = seen.append
    log.write({"step": 110, "loss": 0.9}, "step 110")
    last = json.loads(path.read_text().splitlines()[-1])
    assert last["step"] == 110 and last["wall"] >= 12.0 and seen == [last]


def test_a_disabled_log_writes_nothing(tmp_path: Path) -> None:
    MetricsLog(tmp_path, enabled=False, start_wall=0.0).write({"step": 1}, "step 1")
    assert not (tmp_path / METRICS_NAME).exists()
