"""Training: the loop that starts or resumes a run (its settings: mtkit.training.config), updates until a
stop condition, validates, saves and averages.

`train()` reads top to bottom: start_run -> update_until_stopped (batches -> update -> log -> validate -> save)
-> finish. The run, how it starts and how it finishes are in mtkit.training.run, one update and the validation set
in mtkit.training.step, what the loop keeps between updates in mtkit.training.state, the criterion in
mtkit.training.loss, torchrun plumbing in mtkit.training.distributed, run-directory bookkeeping in
mtkit.runs.directory, the corpora and valid sets a run reads in mtkit.training.data."""

from __future__ import annotations

import dataclasses
import functools
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from mtkit.corpus.modifiers import BatchModifier
from mtkit.model.precision import configure_cuda_kernels
from mtkit.training.config import TrainConfig, TrainRecipe, decide_decay, scheduled_lr
from mtkit.training.distributed import setup_distributed
from mtkit.training.monitor import require_tensorboard
from mtkit.training.run import Run, finish, start_run
from mtkit.training.state import LogWindow, SignalFlag, StopVotes, gradient_norm, kill_for_fault
from mtkit.training.step import pad_multiple, token_ids, train_step


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


def configure_cpu(cfg: TrainConfig) -> None:
    """The process-wide CPU settings of a run: its threads and its float32 products' library."""
    from mtkit.model.onednn import set_cpu_matmul

    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    set_cpu_matmul(cfg.cpu_matmul)


def train(data_dir: Path, run_dir: Path, recipe: TrainRecipe) -> dict | None:
    """Train, or resume the run in `run_dir`; returns a summary dict on rank 0 (None on the other ranks).
    `recipe` is a resolved mtkit.recipe.Recipe."""
    from mtkit.console import warn
    from mtkit.corpus.binarized import read_manifest
    from mtkit.files import DirectoryLock
    from mtkit.training.data import batch_resampler, open_training_data

    ctx = setup_distributed(recipe.train.device, recipe.train.dist_timeout_minutes)
    configure_cpu(recipe.train)
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


def update_until_stopped(run: Run, train_data: Any) -> tuple[str, int]:
    """Epochs of updates until a stop condition; returns why it stopped and the signal behind it (0: none)."""
    from mtkit.corpus.batching import epoch_batches
    from mtkit.corpus.binarized import prefetch_groups
    from mtkit.corpus.mixing import epoch_draw

    cfg, ctx, state = run.cfg, run.ctx, run.state
    flag = SignalFlag()
    stop = ""
    try:
        while not stop:
            multiple = pad_multiple(cfg, ctx.device)
            batches = epoch_batches(
                train_data.src_lens,
                train_data.tgt_lens,
                cfg.max_tokens,
                cfg.seed,
                state.epoch,
                ctx.rank,
                ctx.world_size,
                pad_multiple=multiple,
                drawn=epoch_draw(run.mixture, cfg.seed, state.epoch),
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
