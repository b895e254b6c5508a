"""Training: the loop that starts or resumes a run (its settings: mtkit.training.config), updates until a
stop condition, validates, saves and averages.

`train()` reads top to bottom: start_run -> update_until_stopped (batches -> update -> log -> validate -> save)
-> finish. One update and the validation set are in mtkit.training.step, what the loop keeps between updates in
mtkit.training.state, the criterion in mtkit.training.loss, torchrun plumbing in mtkit.training.distributed,
run-directory bookkeeping in mtkit.runs.directory, the corpora and valid sets a run reads in mtkit.training.data.

About 470 lines, over the 450 the modules keep to: the loop is one function read top to bottom (docs/architecture.md),
and a time budget's decay is decided between two updates from the votes every rank sums in the loop's all-reduce
(record_decay), so it stays beside them; the arithmetic of the decision is in mtkit.training.config. The next split
is start_run and finish into a module of their own."""

from __future__ import annotations

import dataclasses
import functools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from mtkit.corpus.modifiers import BatchModifier
from mtkit.file_names import SPM_NAME
from mtkit.model.transformer import configure_cuda_kernels
from mtkit.runs.checkpoint import BackgroundSaver, HostSnapshot
from mtkit.training.config import (
    TrainConfig,
    TrainRecipe,
    averaging_start,
    decay_plan,
    decide_decay,
    scheduled_lr,
)
from mtkit.training.distributed import DistContext, restore_rng, rng_state, setup_distributed, wrap_ddp
from mtkit.training.loss import LossModule
from mtkit.training.monitor import TensorBoardLog, require_tensorboard
from mtkit.training.state import (
    LogWindow,
    Pace,
    SignalFlag,
    StopVotes,
    TrainState,
    fault_kill_attempt,
    gradient_norm,
    kill_for_fault,
    make_payload,
)
from mtkit.training.step import (
    Validation,
    build_optimizer,
    make_scaler,
    pad_multiple,
    token_ids,
    train_step,
    validation_record,
    validation_sets,
)


def resolve_train_precision(recipe: TrainRecipe, device: torch.device) -> TrainRecipe:
    """The recipe with `train.precision` resolved for `device` (auto: bf16 where it runs natively, else fp32),
    refused in one line where it cannot run; what the run records and `--dry-run` shows."""
    from mtkit.console import warn
    from mtkit.errors import UserError
    from mtkit.model.precision import resolve_precision

    try:
        precision = resolve_precision(recipe.train.precision, device, "train.precision", warn)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    return dataclasses.replace(recipe, train=dataclasses.replace(recipe.train, precision=precision))


def set_threads(cfg: TrainConfig) -> None:
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)


def train(data_dir: Path, run_dir: Path, recipe: TrainRecipe) -> dict | None:
    """Train, or resume the run in `run_dir`; returns a summary dict on rank 0 (None on the other ranks).
    `recipe` is a resolved mtkit.recipe.Recipe."""
    from mtkit.console import warn
    from mtkit.corpus.binarized import read_manifest
    from mtkit.files import DirectoryLock
    from mtkit.training.data import batch_resampler, open_training_data

    ctx = setup_distributed(recipe.train.device, recipe.train.dist_timeout_minutes)
    set_threads(recipe.train)
    recipe = resolve_train_precision(recipe, ctx.device)
    configure_cuda_kernels(ctx.device)
    data_dir, run_dir = Path(data_dir), Path(run_dir)
    if recipe.train.tensorboard_dir:
        require_tensorboard()  # on every rank, before any work: none waits in vain for a rank that stopped
    manifest = read_manifest(data_dir)
    # Every data check (corpora, weights, valid sets) before the run directory is touched.
    data = open_training_data(
        data_dir, manifest, recipe.as_dict()["preprocess"].get("corpora"), recipe.train, ctx.is_main
    )
    max_len = recipe.model.max_positions - 1
    data.resample = batch_resampler(
        data_dir, manifest, recipe.train, recipe.modifiers, max_len, ctx.rank, recipe.term_hints
    )
    lock = DirectoryLock(run_dir, warn=warn)
    if ctx.is_main:
        lock.acquire()
    run = None
    try:
        run, train_data = start_run(data_dir, run_dir, recipe, manifest, data, ctx)
        try:
            stop, signum = update_until_stopped(run, train_data)
            return finish(run, stop, signum)
        except BaseException:
            run.saver.wait(raise_error=False)  # the save in flight ends (or fails) before this error is reported
            raise
    finally:
        if run is not None:
            run.metrics.close()
        lock.release()
        if ctx.world_size > 1 and dist.is_initialized():
            dist.destroy_process_group()


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


def update_until_stopped(run: Run, train_data: Any) -> tuple[str, int]:
    """Epochs of updates until a stop condition; returns why it stopped and the signal behind it (0: none)."""
    from mtkit.corpus.binarized import prefetch_groups
    from mtkit.corpus.mixing import mixed_epoch_batches

    cfg, ctx, state = run.cfg, run.ctx, run.state
    flag = SignalFlag()
    stop = ""
    try:
        while not stop:
            multiple = pad_multiple(cfg, ctx.device)
            batches = mixed_epoch_batches(
                train_data.src_lens,
                train_data.tgt_lens,
                run.mixture,
                cfg.max_tokens,
                cfg.seed,
                state.epoch,
                ctx.rank,
                ctx.world_size,
                pad_multiple=multiple,
            )
            # The next groups are collated on a background thread while this one computes.
            groups = prefetch_groups(
                train_data,
                batches,
                state.position,
                cfg.update_freq,
                ctx.device,
                pad_multiple=multiple,
                token_ids=token_ids(run.model.cfg),
                resample=run.resample and functools.partial(run.resample, epoch=state.epoch),
                regroup=isinstance(run.resample, BatchModifier),
            )
            try:
                for group in groups:
                    if cfg.max_steps and state.step >= cfg.max_steps:
                        stop = "max_steps"
                        break
                    if run.decay_ended():
                        stop = "max_time"
                        break
                    stored = min(cfg.update_freq, len(batches) - state.position)  # the regrouped may hold more
                    if update(run, group, stored, flag):
                        stop = after_update(run, flag)
                    if stop:
                        break
            finally:
                groups.close()
            if state.position >= len(batches):
                state.epoch, state.position = state.epoch + 1, 0
                if cfg.max_epochs and state.epoch > cfg.max_epochs:
                    stop = stop or "max_epochs"
    finally:
        flag.restore()
    return stop, flag.signum


def update(run: Run, group: list[Any], stored: int, flag: SignalFlag) -> bool:
    """One update attempt over `group` (the micro-batches of `stored` batches of the epoch: update_freq, but at its
    end; more micro-batches when the modifiers regrouped them), logged every log_interval updates; False when
    it was skipped (non-finite loss, out of memory), an error after max_bad_steps skips in a row.

    The stop votes (signal, time limit, save interval) ride in the step's one all-reduce (run.votes after it),
    so every rank decides alike without a second collective per update."""
    from mtkit.errors import NumericalError, StorageError

    cfg, ctx, state = run.cfg, run.ctx, run.state
    state.attempts += 1
    if state.attempts == run.kill_at:
        kill_for_fault(run.run_dir, ctx.rank, state.attempts)
    lr = scheduled_lr(cfg, state.step + 1, run.plan())
    wall = run.metrics.wall()
    votes = StopVotes(
        signal=float(flag.signum),
        time_up=float(cfg.max_time_minutes > 0 and wall >= cfg.max_time_minutes * 60),
        save_due=float(
            cfg.save_interval_minutes > 0 and time.monotonic() - run.last_save >= cfg.save_interval_minutes * 60
        ),
    )
    votes.decay_due, votes.budget_end = run.pace.decay_votes(cfg, state, wall)
    try:
        result = train_step(
            run.module,
            run.optimizer,
            run.scaler,
            group,
            ctx,
            lr,
            state.attempts,
            cfg.precision,
            cfg.clip_norm,
            votes.as_list(),
        )
    except torch.OutOfMemoryError:
        raise StorageError(
            f"out of memory at step {state.step + 1} (distributed runs cannot skip a batch); lower train.max_tokens"
        ) from None
    state.position += stored
    if result.skipped == "overflow":  # the scaler's routine calibration, not a failure: no step, no schedule
        run.metrics.write(
            {"step": state.step, "skipped": result.skipped, "attempt": state.attempts},
            f"fp16 overflow: step {state.step + 1} skipped, loss scale lowered",
        )
        return False
    if result.skipped:
        run.bad += 1
        run.metrics.write(
            {"step": state.step, "skipped": result.skipped, "attempt": state.attempts},
            f"warning: step {state.step + 1}: {result.skipped} update skipped ({run.bad} in a row)",
        )
        if run.bad > cfg.max_bad_steps:
            error = NumericalError if result.skipped == "nonfinite" else StorageError
            what = "non-finite loss" if result.skipped == "nonfinite" else "out of memory"
            raise error(
                f"{what} at step {state.step + 1}, {run.bad} updates in a row; last good checkpoint left intact"
            )
        return False
    run.bad = 0
    state.step += 1
    run.votes = StopVotes.from_list(result.flags)
    run.pace.mark(run.metrics.wall(), state.step)
    if run.votes.budget_end and not state.decay_end:  # a time budget's decay, not decided yet (Pace.decay_votes)
        record_decay(run)
    run.window.add(result.loss, result.nll, result.src_tokens, result.tgt_tokens)
    if state.step % cfg.log_interval == 0:
        record = run.window.record(state, lr, gradient_norm(run.model, result.grad_norm))
        run.metrics.write(
            record,
            f"step {state.step} | epoch {state.epoch} | loss {record['loss']:.3f} | "
            f"ppl {record['ppl']:.2f} | lr {lr:.3g} | {record['tokens_per_s']:.0f} tok/s | "
            f"{run.metrics.wall():.0f}s",
        )
        run.window = LogWindow()
    return True


def record_decay(run: Run) -> None:
    """Decide a time-budgeted decay after this update, once, from the votes every rank summed (so all decide
    alike), and record it in the training state: a resumed run goes on with it instead of deciding again."""
    state, votes = run.state, run.votes
    plan = decide_decay(run.cfg, state.step, votes.decay_due > 0, votes.budget_end / run.ctx.world_size)
    if plan is None:
        return
    state.decay_start, state.decay_end = plan
    run.metrics.write(
        {"step": state.step, "decay_start": plan[0], "decay_end": plan[1]},
        f"lr decay from step {plan[0]} to step {plan[1]}, where the budget ends",
    )


def after_update(run: Run, flag: SignalFlag) -> str:
    """Validate and save when due; returns why to stop ("" to go on). The signal, time-limit and save-interval
    votes were summed over ranks by the update, so every rank decides alike; a single process also sees a signal
    that came during the update (ranks would not agree on that one, and stop after the next update instead)."""
    cfg, state, votes = run.cfg, run.state, run.votes
    stop = ""
    if cfg.valid_interval_steps and state.step % cfg.valid_interval_steps == 0 and run.validate():
        stop = "patience"
    if votes.signal or (run.ctx.world_size == 1 and flag.signum):
        stop = "signal"
    elif cfg.max_steps and state.step >= cfg.max_steps:
        stop = "max_steps"
    elif votes.time_up or run.decay_ended():
        stop = stop or "max_time"
    due = (cfg.save_interval_steps and state.step % cfg.save_interval_steps == 0) or votes.save_due
    if due and not stop:
        run.save()
    return stop


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
