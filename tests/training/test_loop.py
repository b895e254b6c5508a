"""Training: the schedule by hand, overfitting, exact resume, averaging, DDP == accumulation, faults, validation."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from mtkit.faults import FAULTS_ENV
from mtkit.model.transformer import ModelConfig, Transformer
from mtkit.recipe import resolve_recipe
from mtkit.runs.checkpoint import load_checkpoint
from mtkit.runs.checkpoint_files import list_checkpoints
from mtkit.training.config import learning_rate, noam_peak_lr
from mtkit.training.loop import train

TORCHRUN = Path(sys.executable).with_name("torchrun")


def tiny_recipe(*overrides: str, vocab: int = 1000):
    base = ["train.warmup_steps=20", "train.log_interval=5", "train.save_interval_minutes=0", "train.max_tokens=1024"]
    return resolve_recipe(None, "tiny", base + list(overrides), vocab_size=vocab)


def model_params(path: Path) -> dict[str, torch.Tensor]:
    return load_checkpoint(path)["model"]


def test_learning_rate_is_the_papers_formula() -> None:
    d_model, warmup = 512, 4000
    peak = noam_peak_lr(d_model, warmup)
    for step in (1, 100, 3999, 4000, 4001, 10_000, 100_000):
        paper = d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)
        assert learning_rate(step, peak, warmup) == pytest.approx(paper, rel=1e-12)
    assert learning_rate(500, 1e-3, 1000) == pytest.approx(5e-4)
    assert learning_rate(4000, 1e-3, 1000) == pytest.approx(5e-4)


def test_overfits_64_pairs(overfit_run: Path) -> None:
    """The overfit_run fixture trains 100 steps on 64 pairs (no dropout, no smoothing); its loss must reach ~0."""
    records = [json.loads(line) for line in (overfit_run / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in records if "loss" in r]
    valid = [r["valid_loss"] for r in records if "valid_loss" in r]
    assert losses[0] > 5.0 and losses[-1] < 0.1, losses
    assert valid and valid[-1] < 0.1  # valid = the same 64 pairs
    for record in records:
        if "loss" in record:
            assert {"step", "wall", "lr", "src_tokens", "tgt_tokens", "tokens_per_s"} <= set(record)


@pytest.mark.exactness
@pytest.mark.parametrize("library", ["onednn", "mkl"])
def test_resume_is_exact(tmp_path: Path, small_data: Path, library: str) -> None:
    """20 steps straight == 10 steps, stop, resume to 20 (dropout on, float32 CPU: bit-identical), with the float32
    products on either library (train.cpu_matmul), whichever kernels this CPU runs."""
    from mtkit.model.onednn import set_cpu_matmul

    common = (
        "train.save_interval_steps=5",
        "train.keep_last=3",
        "train.average_last=2",
        f"train.cpu_matmul='{library}'",
    )
    try:
        train(small_data, tmp_path / "straight", tiny_recipe(*common, "train.max_steps=20"))
        train(small_data, tmp_path / "split", tiny_recipe(*common, "train.max_steps=10"))
        train(small_data, tmp_path / "split", tiny_recipe(*common, "train.max_steps=20"))
    finally:
        set_cpu_matmul("auto")  # the process-wide default the other tests' runs expect
    a = model_params(list_checkpoints(tmp_path / "straight")[-1])
    b = model_params(list_checkpoints(tmp_path / "split")[-1])
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a), [k for k in a if not torch.equal(a[k], b[k])]
    # the optimizer state continued too, and keep_last pruned older checkpoints
    assert len(list_checkpoints(tmp_path / "straight")) == 3


def test_resume_drops_metrics_logged_after_the_checkpoint(tmp_path: Path, small_data: Path) -> None:
    """A killed run logs past its last checkpoint; the resumed run redoes those steps, logged once each."""
    common = ("train.save_interval_steps=2", "train.log_interval=1")
    train(small_data, tmp_path / "run", tiny_recipe(*common, "train.max_steps=4"))
    path = tmp_path / "run" / "metrics.jsonl"
    # What a run killed during step 6 leaves after its step-4 checkpoint: step 5's record, step 6's cut short.
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"step": 5, "loss": 99.0}) + "\n" + json.dumps({"step": 6, "loss": 99.0})[:9])
    train(small_data, tmp_path / "run", tiny_recipe(*common, "train.max_steps=6"))
    records = [json.loads(x) for x in path.read_text().splitlines()]
    logged = [r for r in records if "loss" in r]
    assert [r["step"] for r in logged] == [1, 2, 3, 4, 5, 6]
    assert all(r["loss"] != 99.0 for r in logged)


@pytest.mark.exactness
def test_average_is_mean_of_last_checkpoints(tmp_path: Path, small_data: Path) -> None:
    train(
        small_data,
        tmp_path / "run",
        tiny_recipe("train.max_steps=15", "train.save_interval_steps=5", "train.average_last=3"),
    )
    paths = list_checkpoints(tmp_path / "run")[-3:]
    averaged = load_checkpoint(tmp_path / "run" / "average.pt")
    assert averaged["averaged_steps"] == [5, 10, 15]
    params = [model_params(p) for p in paths]
    for key, value in averaged["model"].items():
        mean = torch.stack([each[key].float() for each in params]).mean(0)
        assert torch.allclose(value, mean, atol=1e-6), key


def cli(*args: str, env: dict | None = None, launcher: list[str] | None = None) -> subprocess.CompletedProcess:
    command = (launcher or [sys.executable, "-m"]) + ["mtkit", *args]
    # torchrun --no-python runs `mtkit` from PATH: the virtual environment's bin, even when not activated.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return subprocess.run(
        command, capture_output=True, text=True, env={**os.environ, "PATH": path, **(env or {})}, timeout=300
    )


def cli_in_process(*args: str) -> subprocess.CompletedProcess:
    """`mtkit ARGS` in this process (CliRunner), for what ends before any training (--dry-run, refusals): the same
    exit code and output without a torch import; an escaped exception fails. Exit 2 with one line from a real
    process: tests/cli/test_main.py, tests/recipes/test_recipe.py::test_cli_bad_recipe_is_one_line."""
    from typer.testing import CliRunner

    from mtkit.cli.main import app

    result = CliRunner().invoke(app, list(args))
    assert result.exit_code in (0, 2), (result.exception, result.stderr)
    return subprocess.CompletedProcess(["mtkit", *args], result.exit_code, result.stdout, result.stderr)


@pytest.mark.exactness
@pytest.mark.slow
def test_two_rank_ddp_equals_update_freq_2(tmp_path: Path, small_data: Path) -> None:
    # train.threads=1: the same reduction order in every process, whatever OMP_NUM_THREADS says.
    sets = [
        "model.dropout=0.0",
        "train.warmup_steps=3",
        "train.max_tokens=1024",
        "train.save_interval_minutes=0",
        "train.average_last=1",
        "train.threads=1",
    ]
    common = ["--arch", "tiny", "--max-steps", "6", *(arg for item in sets for arg in ("--set", item))]
    # The single process accumulating 2 batches is this one; the two ranks are `mtkit train` under torchrun.
    train(
        small_data,
        tmp_path / "one",
        resolve_recipe(None, "tiny", [*sets, "train.max_steps=6", "train.update_freq=2"], vocab_size=1000),
    )
    launcher = [str(TORCHRUN), "--nproc-per-node", "2", "--master-port", "29533", "--no-python"]
    board = ["--tensorboard", str(tmp_path / "board")] if importlib.util.find_spec("tensorboard") else []
    ddp = cli(
        "train",
        str(small_data),
        "--save-dir",
        str(tmp_path / "two"),
        *common,
        *board,
        launcher=launcher,
        env={"OMP_NUM_THREADS": "1"},
    )
    assert ddp.returncode == 0, ddp.stderr[-3000:]
    if board:  # TensorBoard events come from rank 0 alone: one event file
        assert len(list((tmp_path / "board").glob("events.out.tfevents.*"))) == 1
    a = model_params(list_checkpoints(tmp_path / "one")[-1])
    b = model_params(list_checkpoints(tmp_path / "two")[-1])
    assert load_checkpoint(list_checkpoints(tmp_path / "two")[-1])["step"] == 6
    worst = max((a[k] - b[k]).abs().max().item() for k in a)
    assert worst < 1e-5, worst
    # and training really moved them: compare with the seeded initial parameters both runs started from
    torch.manual_seed(1)
    initial = Transformer(ModelConfig(**load_checkpoint(list_checkpoints(tmp_path / "one")[-1])["configs"]["model"]))
    moved = max((a[k] - v).abs().max().item() for k, v in initial.state_dict().items())
    assert moved > 1e-3, moved


def test_repeated_nan_exits_75_and_keeps_last_checkpoint(tmp_path: Path, small_data: Path) -> None:
    args = [
        "train",
        str(small_data),
        "--save-dir",
        str(tmp_path / "run"),
        "--arch",
        "tiny",
        "--max-steps",
        "30",
        "--set",
        "train.save_interval_steps=2",
        "--set",
        "train.max_tokens=1024",
        "--set",
        "train.save_interval_minutes=0",
    ]
    run = cli(*args, env={FAULTS_ENV: "nan_steps=" + ",".join(str(i) for i in range(5, 20))})
    assert run.returncode == 75, run.stderr[-2000:]
    assert "non-finite loss at step 5" in run.stderr and "Traceback" not in run.stderr
    assert [p.name for p in list_checkpoints(tmp_path / "run")][-1] == "step_00000004.pt"
    load_checkpoint(list_checkpoints(tmp_path / "run")[-1])


def test_resume_with_other_architecture_is_refused(tmp_path: Path, small_data: Path) -> None:
    train(small_data, tmp_path / "run", tiny_recipe("train.max_steps=2"))
    before = sorted(p.name for p in (tmp_path / "run").rglob("*"))
    run = cli("train", str(small_data), "--save-dir", str(tmp_path / "run"), "--arch", "small", "--max-steps", "4")
    assert run.returncode == 2 and "architecture differs" in run.stderr and "Traceback" not in run.stderr
    assert sorted(p.name for p in (tmp_path / "run").rglob("*")) == before


def test_validation_reports_bleu(tmp_path: Path, overfit_data: Path) -> None:
    recipe = tiny_recipe(
        "train.max_steps=4",
        "train.valid_bleu=True",
        "train.valid_interval_steps=2",
        "translate.beam=2",
        "translate.max_len_b=5",
    )
    train(overfit_data, tmp_path / "run", recipe)
    records = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    bleus = [r["valid_bleu"] for r in records if "valid_bleu" in r]
    assert [r["step"] for r in records if "valid_bleu" in r] == [2, 4]
    assert all(0.0 <= b <= 100.0 for b in bleus)


def test_a_valid_pair_longer_than_the_model_takes_is_left_out_not_fatal(
    tmp_path: Path, multi30k: Path, multi30k_spm: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """preprocess keeps a valid split whole; a pair over the model's positions (a catalog's help text of many lines
    joined) once stopped the run at its last validation, after the whole budget, the last updates unsaved."""
    from mtkit.corpus.config import PreprocessConfig
    from mtkit.corpus.preprocess import preprocess
    from tests.conftest import read_gz_lines

    raw = tmp_path / "raw"
    raw.mkdir()
    for lang in ("en", "de"):
        lines = read_gz_lines(multi30k / f"train.{lang}.gz", 32)
        (raw / f"train.{lang}").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        (raw / f"valid.{lang}").write_text("".join(f"{line}\n" for line in [*lines[:8], " ".join(lines)]), "utf-8")
    data = tmp_path / "data"
    cfg = PreprocessConfig("en", "de", train=str(raw / "train"), valid=str(raw / "valid"), spm_model=str(multi30k_spm))
    preprocess(cfg, data)
    train(data, tmp_path / "run", tiny_recipe("train.max_steps=2", "model.max_positions=128", "train.valid_bleu=True"))
    assert "valid: 1 of 9 pairs longer than the model's 127 tokens left out of validation" in capfd.readouterr().err
    records = logged(tmp_path / "run")
    assert records[-1]["step"] == 2 and records[-1]["valid_loss"] > 0
    assert [path.name for path in list_checkpoints(tmp_path / "run")][-1] == "step_00000002.pt"


def logged(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]


def test_fine_tuning_starts_at_the_parents_loss(tmp_path: Path, small_data: Path, tiny_run: Path) -> None:
    """--init-from on the parent's own data starts where the parent ended, not at a fresh model's loss (~7).

    One update at warm-up's first learning rate (1e-6) barely moves the weights, so the validation loss after
    it is the parent's final one; the first training loss is one batch's, so only near the parent's."""
    first = ("train.max_steps=1", "train.log_interval=1", "train.max_tokens=2048", "train.warmup_steps=1000")
    train(small_data, tmp_path / "fine", tiny_recipe(*first, f"train.init_from={str(tiny_run)!r}"))
    train(small_data, tmp_path / "fresh", tiny_recipe(*first))
    parent = logged(tiny_run)
    fine, fresh = logged(tmp_path / "fine"), logged(tmp_path / "fresh")
    parent_loss, fine_loss, fresh_loss = ([r["loss"] for r in run if "loss" in r] for run in (parent, fine, fresh))
    assert abs(fine_loss[0] - parent_loss[-1]) < 0.35 * (fresh_loss[0] - parent_loss[-1]), (
        parent_loss,
        fine_loss,
        fresh_loss,
    )
    parent_valid, fine_valid, fresh_valid = (
        [r["valid_loss"] for r in run if "valid_loss" in r] for run in (parent, fine, fresh)
    )
    assert abs(fine_valid[-1] - parent_valid[-1]) < 0.01 and fresh_valid[-1] - parent_valid[-1] > 1.0, (
        parent_valid,
        fine_valid,
        fresh_valid,
    )
    # a fresh schedule and step count: step 1 at the learning rate of the fresh run's step 1
    assert [r["step"] for r in fine if "loss" in r] == [1] and fine[0]["lr"] == fresh[0]["lr"]
    # ... and a fresh optimizer: Adam's state counts one step, not the parent's 150 + 1
    state = load_checkpoint(list_checkpoints(tmp_path / "fine")[-1])["optimizer"]["state"]
    assert {float(s["step"]) for s in state.values()} == {1.0}


def test_fine_tuning_refuses_another_architecture_or_vocabulary(
    tmp_path: Path, small_data: Path, multi30k: Path, tiny_run: Path
) -> None:
    """Through the CLI: one line naming what differs (field, parent value, new value), exit 2, nothing trained."""
    from mtkit.corpus.tokenizer_training import train_tokenizer
    from tests.conftest import preprocess_slice, read_gz_lines

    other = cli_in_process(
        "train",
        str(small_data),
        "--save-dir",
        str(tmp_path / "arch"),
        "--arch",
        "small",
        "--max-steps",
        "2",
        "--init-from",
        str(tiny_run / "average.pt"),
    )
    assert other.returncode == 2 and "Traceback" not in other.stderr, other.stderr[-2000:]
    assert other.stderr.strip().splitlines() == [
        f"error: {tiny_run / 'average.pt'}: cannot initialize from it: "
        "architecture differs (d_ff parent 128, new 1024, d_model parent 64, new 256, decoder_layers parent 2, new 3, "
        "encoder_layers parent 2, new 3, n_heads parent 2, new 4); train with the parent's --arch or [model] settings"
    ]
    # Data binarized with another sentencepiece model of the same size: the ids would mean other pieces.
    lines = read_gz_lines(multi30k / "train.en.gz", 6000)[3000:] + read_gz_lines(multi30k / "train.de.gz", 6000)[3000:]
    spm = train_tokenizer(lines, tmp_path / "other-spm.model", vocab_size=1000)
    data = preprocess_slice(tmp_path / "other-data", multi30k, spm, 100, 20)
    vocab = cli_in_process(
        "train",
        str(data),
        "--save-dir",
        str(tmp_path / "vocab"),
        "--arch",
        "tiny",
        "--max-steps",
        "2",
        "--init-from",
        str(tiny_run),
    )
    assert vocab.returncode == 2 and "Traceback" not in vocab.stderr, vocab.stderr[-2000:]
    [line] = vocab.stderr.strip().splitlines()
    assert "cannot initialize from it: sentencepiece model differs (spm_sha256 parent " in line
    assert "--spm-model PARENT_RUN/spm.model" in line
    assert not list_checkpoints(tmp_path / "arch") and not list_checkpoints(tmp_path / "vocab")
    # The README's way: new data encoded with the parent run's spm.model is accepted.
    data = preprocess_slice(tmp_path / "same-spm-data", multi30k, tiny_run / "spm.model", 100, 20)
    same = cli(
        "train",
        str(data),
        "--save-dir",
        str(tmp_path / "same"),
        "--arch",
        "tiny",
        "--max-steps",
        "2",
        "--init-from",
        str(tiny_run),
    )
    assert same.returncode == 0 and "initialized from" in same.stderr, same.stderr[-2000:]


def test_log_interval_flag_is_the_recipe_key(tmp_path: Path, small_data: Path) -> None:
    """--log-interval N resolves as --set train.log_interval=N, and a run logs every N updates."""
    dry = [
        cli_in_process(
            "train",
            str(small_data),
            "--save-dir",
            str(tmp_path / "dry"),
            "--arch",
            "tiny",
            "--dry-run",
            "--json",
            *flag,
        )
        for flag in (["--log-interval", "3"], ["--set", "train.log_interval=3"], [])
    ]
    assert all(d.returncode == 0 for d in dry), [d.stderr[-1000:] for d in dry]
    configs = [json.loads(d.stdout) for d in dry]
    assert configs[0] == configs[1] and configs[0]["train"]["log_interval"] == 3 != configs[2]["train"]["log_interval"]
    run = cli(
        "train",
        str(small_data),
        "--save-dir",
        str(tmp_path / "run"),
        "--arch",
        "tiny",
        "--max-steps",
        "7",
        "--log-interval",
        "3",
        "--set",
        "train.max_tokens=1024",
        "--set",
        "train.save_interval_minutes=0",
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert [r["step"] for r in logged(tmp_path / "run") if "loss" in r] == [3, 6]
    zero = cli_in_process(
        "train", str(small_data), "--save-dir", str(tmp_path / "zero"), "--arch", "tiny", "--log-interval", "0"
    )
    assert zero.returncode == 2 and "log_interval must be at least 1" in zero.stderr and "Traceback" not in zero.stderr


class SkippingScaler:
    """Stands in for fp16's GradScaler: overflows (skips the optimizer step and halves its scale) on the
    optimizer steps named in `skip` (1-based), steps normally otherwise."""

    def __init__(self, skip: set[int]) -> None:
        self.skip, self.calls, self.scale_value = skip, 0, 1024.0

    def scale(self, loss: torch.Tensor) -> torch.Tensor:
        return loss

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        pass

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        self.calls += 1
        if self.calls not in self.skip:
            optimizer.step()

    def update(self) -> None:
        if self.calls in self.skip:
            self.scale_value /= 2

    def get_scale(self) -> float:
        return self.scale_value

    def state_dict(self) -> dict:
        return {"scale": self.scale_value}


def test_fp16_overflow_skips_do_not_advance_step_or_schedule(
    tmp_path: Path, small_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mtkit.training.run

    monkeypatch.setattr(mtkit.training.run, "make_scaler", lambda precision: SkippingScaler({2, 3}))
    recipe = tiny_recipe("train.max_steps=3", "train.log_interval=1", "train.lr=1e-3", "train.warmup_steps=10")
    train(small_data, tmp_path / "run", recipe)
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [(r["attempt"], r["skipped"]) for r in records if "skipped" in r] == [(2, "overflow"), (3, "overflow")]
    logged = [(r["step"], r["lr"]) for r in records if "loss" in r]
    # steps 2 and 3 came at attempts 4 and 5 with the schedule's step-2 and step-3 rates
    assert logged == [(s, pytest.approx(learning_rate(s, 1e-3, 10))) for s in (1, 2, 3)]
    state = load_checkpoint(list_checkpoints(tmp_path / "run")[-1])["state"]
    assert (state["step"], state["attempts"]) == (3, 5)


# Two corpora, two directions (tests/conftest.py::multilingual_data: en->de 240 pairs, en->fr 120 pairs at weight 2
# with a tag, language tokens): an epoch draws 120 + 240 pairs, 16 updates of 1,024 tokens.
MULTI_STEPS, MULTI_KILL_AT = 24, 19
MULTI_SETS = (
    "train.max_tokens=1024",
    "train.subword_alpha=0.1",
    *(f"modifiers.{name}=0.1" for name in ("upper_case", "title_case", "typos", "remove_end_punct", "merge")),
    "train.save_interval_steps=5",
    "train.valid_interval_steps=8",
    "train.valid_bleu=True",
    "translate.beam=1",
    "translate.max_len_b=5",
    "train.keep_last=2",
    "train.average_last=1",
)


@pytest.mark.exactness
def test_two_corpora_two_directions_resume_exactly_after_kill9(tmp_path: Path, multilingual_data: Path) -> None:
    """kill -9 at update 19 (the second epoch's third), then the same command: it resumes from step 15 (in the first
    epoch), draws the second epoch again, and ends with the weights, Adam moments and per-pair validations of a run
    never stopped (float32 CPU, dropout on, every modifier on at 0.1, then subword regularization: BPE-dropout 0.1 on
    both sides)."""
    from tests.reliability.common import TRAIN_SETS, Trainer, differing_tensors, newest_step, train_command

    reference = tmp_path / "reference"
    sets = [*TRAIN_SETS, *MULTI_SETS, f"train.max_steps={MULTI_STEPS}"]
    train(multilingual_data, reference, resolve_recipe(None, "tiny", sets, vocab_size=600))
    run = tmp_path / "killed"
    command = train_command(multilingual_data, run, MULTI_STEPS, *MULTI_SETS)
    killed = Trainer(command, env={FAULTS_ENV: f"kill_rank_at=0:{MULTI_KILL_AT}"})
    assert killed.finish() == -9 and killed.steps[-1] == MULTI_KILL_AT - 1, killed.stderr[-3000:]
    assert newest_step(run) == 15
    resumed = Trainer(command)
    assert resumed.finish() == 0, resumed.stderr[-3000:]
    assert resumed.steps[0] == 16
    final, expected = (load_checkpoint(list_checkpoints(path)[-1]) for path in (run, reference))
    assert final["step"] == expected["step"] == MULTI_STEPS and final["state"]["epoch"] == 2
    assert not differing_tensors(final["model"], expected["model"])
    assert not differing_tensors(final["optimizer"], expected["optimizer"])
    valid = [
        [{k: v for k, v in r.items() if k != "wall"} for r in logged(path) if "valid_loss" in r]
        for path in (run, reference)
    ]
    assert valid[0] == valid[1] and [r["step"] for r in valid[0]] == [8, 16, 24]
    for record in valid[0]:  # per pair, and the pooled loss between the pairs' losses
        pairs = [record["valid_loss/en-de"], record["valid_loss/en-fr"]]
        assert min(pairs) <= record["valid_loss"] <= max(pairs)
        assert record["valid_bleu"] == pytest.approx((record["valid_bleu/en-de"] + record["valid_bleu/en-fr"]) / 2)


class FakeClock:
    """Training seconds for the time budget (mtkit.runs.directory's clock): each update takes `per_update`."""

    def __init__(self, per_update: float) -> None:
        self.seconds, self.per_update = 0.0, per_update

    def monotonic(self) -> float:
        return self.seconds


def timed_training(monkeypatch: pytest.MonkeyPatch, per_update: float) -> FakeClock:
    import mtkit.runs.directory
    import mtkit.training.loop

    clock, step = FakeClock(per_update), mtkit.training.loop.train_step

    def timed_step(*args: object, **kwargs: object) -> object:
        clock.seconds += clock.per_update
        return step(*args, **kwargs)

    monkeypatch.setattr(mtkit.runs.directory, "time", clock)
    monkeypatch.setattr(mtkit.training.loop, "train_step", timed_step)
    return clock


TIMED_SETS = (
    "train.lr_schedule=wsd",
    "train.warmup_steps=4",
    "train.max_time_minutes=0.5",  # 30 s: 30 updates of the fake clock's 1 s
    "train.decay_fraction=0.2",
    "train.log_interval=1",
    "train.save_interval_steps=2",
    "train.average_last=5",
)


@pytest.mark.exactness
def test_time_budget_decay_is_recorded_and_honoured_after_resume(
    tmp_path: Path, small_data: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """wsd on 30 s at 1 s an update: before update 25 the last fifth remains, so after it the decay is decided (steps
    26-30, the pace measured since the first update) and recorded; the run stops at 30 with the rate at 0. Resumed
    from step 26 on a clock twice as fast, which would decide another decay, it goes on with the recorded one and
    ends bit-identical; the average takes the decay's checkpoints only."""
    import shutil

    from mtkit.training.config import scheduled_lr

    timed_training(monkeypatch, 1.0)
    recipe = tiny_recipe(*TIMED_SETS)
    train(small_data, tmp_path / "straight", recipe)
    records = logged(tmp_path / "straight")
    assert [(r["decay_start"], r["decay_end"]) for r in records if "decay_start" in r] == [(25, 30)]
    rates = [(r["step"], r["lr"]) for r in records if "loss" in r]
    assert [step for step, _ in rates] == list(range(1, 31))
    assert rates[-6:] == [(s, pytest.approx(1e-3 * (30 - s) / 5)) for s in range(25, 31)]
    assert all(lr == pytest.approx(scheduled_lr(recipe.train, s, (25, 30))) for s, lr in rates)
    final = load_checkpoint(list_checkpoints(tmp_path / "straight")[-1])
    assert (final["step"], final["state"]["decay_start"], final["state"]["decay_end"]) == (30, 25, 30)
    assert load_checkpoint(tmp_path / "straight" / "average.pt")["averaged_steps"] == [26, 28, 30]

    # What a run killed after its step-26 checkpoint leaves, resumed at 0.5 s an update.
    shutil.copytree(tmp_path / "straight", tmp_path / "resumed")
    for path in [p for p in list_checkpoints(tmp_path / "resumed") if p.name > "step_00000026.pt"]:
        path.unlink()
    (tmp_path / "resumed" / "average.pt").unlink()
    assert load_checkpoint(list_checkpoints(tmp_path / "resumed")[-1])["state"]["decay_end"] == 30
    timed_training(monkeypatch, 0.5)
    train(small_data, tmp_path / "resumed", recipe)
    again = logged(tmp_path / "resumed")
    assert [(r["step"], r["lr"]) for r in again if "loss" in r] == rates
    assert [r for r in again if "decay_start" in r] == [r for r in records if "decay_start" in r]
    a = model_params(list_checkpoints(tmp_path / "straight")[-1])
    b = model_params(list_checkpoints(tmp_path / "resumed")[-1])
    assert all(torch.equal(a[k], b[k]) for k in a), [k for k in a if not torch.equal(a[k], b[k])]
