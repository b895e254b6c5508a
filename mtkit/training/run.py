"""A training run's live objects (Run: what updating, validating and saving share), how it starts (start_run: the
run directory opened, model and optimizer built, the newest valid checkpoint resumed) and how it finishes (finish:
the last validation and save, the averaged model, the summary). The updates between the two are
mtkit.training.loop's; this module never loops over batches."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from mtkit.file_names import SPM_NAME
from mtkit.runs.checkpoint import BackgroundSaver, HostSnapshot
from mtkit.training.config import TrainConfig, TrainRecipe, averaging_start, decay_plan
from mtkit.training.distributed import DistContext, restore_rng, rng_state, wrap_ddp
from mtkit.training.loss import LossModule
from mtkit.training.monitor import TensorBoardLog
from mtkit.training.state import LogWindow, Pace, StopVotes, TrainState, fault_kill_attempt, make_payload
from mtkit.training.step import Validation, build_optimizer, make_scaler, validation_record, validation_sets


@dataclass
class Run:
    """One training run's live objects and loop counters: what updating, validating and saving share."""

    cfg: TrainConfig
    ctx: DistContext
    run_dir: Path
    model: nn.Module
    module: nn.Module  # the loss module, wrapped in DDP / compiled as configured
    optimizer: torch.optim.Optimizer
    scaler: Any
    state: TrainState
    metrics: Any  # mtkit.runs.directory.MetricsLog
    extra: dict  # what every checkpoint carries besides the training state
    resumed_from: Path | None
    translate_cfg: Any  # search settings for validation BLEU
    validation: dict[str, Validation]  # language pair -> its valid set
    mixture: Any = None  # mtkit.corpus.mixing.Mixture of several corpora; None: one corpus, never resampled
    resample: Any = None  # mtkit.training.data.batch_resampler's: modifiers, subword regularization; None: off
    kill_at: int | None = None  # the update attempt at which a test's injected fault kills this rank
    saved_step: int = 0
    bad: int = 0  # skipped updates in a row
    last_save: float = field(default_factory=time.monotonic)
    window: LogWindow = field(default_factory=LogWindow)
    votes: StopVotes = field(default_factory=StopVotes)  # the last update's, summed over ranks
    saver: BackgroundSaver = field(default_factory=BackgroundSaver)  # one checkpoint write in flight at a time
    snapshot: HostSnapshot = field(default_factory=HostSnapshot)  # host copies of the state (GPU: reused buffers)
    pace: Pace = field(default_factory=Pace)  # seconds per update in this process, for a time budget's decay

    def plan(self) -> tuple[int, int] | None:
        """A budget schedule's decay (first and last step), recorded or given by the step budget."""
        return decay_plan(self.cfg, (self.state.decay_start, self.state.decay_end))

    def decay_ended(self) -> bool:
        """Whether the decay a time budget decided has had its last update: the budget, as planned, is spent."""
        return bool(self.cfg.max_time_minutes and self.state.decay_end and self.state.step >= self.state.decay_end)

    def save(self) -> None:
        """Snapshot the state to host memory and hand writing, hashing and pruning to the background saver (rank
        0); training goes on meanwhile. The previous save is finished first (its error, if any, raised here)."""
        from mtkit.runs.checkpoint import prune_checkpoints, save_checkpoint, step_path

        rng = rng_state(self.ctx)
        self.state.wall = self.metrics.wall()
        if self.ctx.is_main:
            self.saver.wait()  # the snapshot buffers are free again
            payload = self.snapshot.take(
                make_payload(self.model, self.optimizer, self.scaler, self.state, rng, self.extra)
            )
            path, cfg = step_path(self.run_dir, self.state.step), self.cfg
            protect = [p for p in (self.resumed_from, step_path(self.run_dir, self.state.best_step)) if p is not None]

            def write() -> None:
                save_checkpoint(path, payload)
                prune_checkpoints(self.run_dir, cfg.keep_last, protect, keep_weights=cfg.average_last)

            self.saver.submit(write)
        self.last_save, self.saved_step = time.monotonic(), self.state.step

    def validate(self) -> bool:
        """Validate; returns True when patience is exhausted."""
        if not any(v.batches for v in self.validation.values()):
            return False
        state, cfg = self.state, self.cfg
        loss, scores = validation_record(
            self.module, self.model, self.validation, self.ctx, cfg, self.extra["spm_model"], self.translate_cfg
        )
        record = {"step": state.step, **scores}
        if loss < state.best_loss:
            state.best_loss, state.best_step, state.stale = loss, state.step, 0
        else:
            state.stale += 1
        bleu = f" | bleu {record['valid_bleu']:.2f}" if "valid_bleu" in record else ""
        pairs = "".join(f" | {key[11:]} {value:.3f}" for key, value in record.items() if key.startswith("valid_loss/"))
        self.metrics.write(
            record,
            f"valid | step {state.step} | loss {loss:.3f}{pairs} | ppl {record['valid_ppl']:.2f}"
            f"{bleu} | best step {state.best_step}",
        )
        return cfg.patience > 0 and state.stale >= cfg.patience


def start_run(
    data_dir: Path, run_dir: Path, recipe: TrainRecipe, manifest: dict, data: Any, ctx: DistContext
) -> tuple[Run, Any]:
    """Open the run directory, build model and optimizer, and resume from the newest valid checkpoint if there is
    one; returns the run and the training data (`data`: mtkit.training.data.TrainingData)."""
    from mtkit.model.transformer import Transformer
    from mtkit.runs.directory import MetricsLog, agreed_checkpoint, init_from_parent, open_run

    cfg, mcfg = recipe.train, recipe.model
    found = open_run(run_dir, data_dir, recipe.as_dict(), manifest, ctx.is_main, agreed_checkpoint(run_dir, ctx))

    torch.manual_seed(cfg.seed)  # identical initial parameters on every rank
    model = Transformer(mcfg).to(ctx.device)
    module: nn.Module = LossModule(model, cfg.label_smoothing, mcfg.pad_id)
    optimizer = build_optimizer(model, cfg, ctx.device)
    scaler = make_scaler(cfg.precision)
    state = TrainState()
    torch.manual_seed(cfg.seed + 7919 * (ctx.rank + 1))  # dropout streams differ per rank
    if found is not None:
        payload = found[1]
        model.load_state_dict(payload["model"])
        optimizer.load_state_dict(payload["optimizer"])
        if scaler is not None and payload["scaler"]:
            scaler.load_state_dict(payload["scaler"])
        state = TrainState(**payload["state"])
        restore_rng(payload["rng"], ctx)
    elif cfg.init_from:
        init_from_parent(model, cfg.init_from, recipe.as_dict(), manifest, ctx.is_main)
    if cfg.compile:
        module.compile_model()  # the model only: the loss's shapes depend on the data on CPU
    if ctx.world_size > 1:
        from mtkit.errors import check

        check(
            not cfg.ddp_bf16_compress or ctx.device.type == "cuda",
            "train.ddp_bf16_compress = true needs CUDA (NCCL); gloo on CPU cannot all-reduce through the bf16 hook",
        )
        module = wrap_ddp(module, ctx, cfg.ddp_bf16_compress)
    module.train()
    extra = {
        "configs": recipe.as_dict(),
        "spm_model": (data_dir / SPM_NAME).read_bytes(),
        "spm_sha256": manifest["spm_sha256"],
        "manifest": manifest,
    }
    monitor = TensorBoardLog(Path(cfg.tensorboard_dir), state.step) if cfg.tensorboard_dir and ctx.is_main else None
    metrics = MetricsLog(run_dir, ctx.is_main, state.wall, state.step, monitor)
    run = Run(
        cfg,
        ctx,
        run_dir,
        model,
        module,
        optimizer,
        scaler,
        state,
        metrics,
        extra,
        found[0] if found is not None else None,
        recipe.translate,
        validation_sets(data.valid, cfg, ctx, mcfg),
        data.mixture,
        data.resample,
        kill_at=fault_kill_attempt(ctx.rank, run_dir),
        saved_step=state.step,
    )
    return run, data.data


def finish(run: Run, stop: str, signum: int) -> dict | None:
    """The last validation and save, then (rank 0) the averaged model and the run's summary."""
    from mtkit.errors import Interrupted
    from mtkit.runs.checkpoint import write_average

    cfg, state = run.cfg, run.state
    validated_now = cfg.valid_interval_steps and state.step % cfg.valid_interval_steps == 0 and stop != "max_epochs"
    if stop != "signal" and not validated_now:
        run.validate()
    if state.step != run.saved_step or run.resumed_from is None:
        run.save()
    run.saver.wait()
    run.snapshot.release()
    if stop == "signal":
        raise Interrupted(signum)
    if not run.ctx.is_main:
        return None  # one summary per run: the CLI prints rank 0's
    first = averaging_start(cfg, run.plan())
    averaged, _ = write_average(run.run_dir, cfg.average_last, first_step=first if state.step >= first else 0)
    return {
        "stop": stop,
        "step": state.step,
        "epoch": state.epoch,
        "wall": round(run.metrics.wall(), 1),
        "best_step": state.best_step,
        "best_valid_loss": state.best_loss,
        "average": str(averaged),
    }
