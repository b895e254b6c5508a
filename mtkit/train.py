"""Training: TrainConfig, the learning-rate schedule, one update, validation, and the training loop.

The loop in `train()` reads top to bottom: batches -> update -> log -> validate -> save. The criterion is in
mtkit/loss.py, torchrun plumbing in mtkit/distributed.py, run-directory bookkeeping in mtkit/rundir.py.
"""

from __future__ import annotations

import math
import os
import signal
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn

from mtkit.distributed import DistContext, restore_rng, rng_state, setup_distributed
from mtkit.loss import LossModule

PRECISIONS = ("fp32", "bf16", "fp16")
SCHEDULES = ("inverse_sqrt", "noam")
# Fault injection for tests: comma-separated update attempts (1-based, skipped ones counted).
FAULT_NAN = "MTKIT_FAULT_NAN_STEPS"
FAULT_OOM = "MTKIT_FAULT_OOM_STEPS"
# "RANK:ATTEMPT": that rank SIGKILLs itself at that update attempt, once per run directory.
FAULT_KILL_RANK = "MTKIT_FAULT_KILL_RANK_AT"


@dataclass
class TrainConfig:
    seed: int = 1
    label_smoothing: float = 0.1
    precision: str = "fp32"
    lr: float = 1e-3  # peak learning rate (derived from d_model and warm-up when lr_schedule = "noam")
    lr_schedule: str = "inverse_sqrt"
    warmup_steps: int = 4000
    adam_betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-9
    weight_decay: float = 0.0
    clip_norm: float = 0.0
    max_tokens: int = 4096
    update_freq: int = 1
    max_steps: int = 0  # 0: no limit
    max_epochs: int = 0
    max_time_minutes: float = 0.0
    save_interval_steps: int = 0
    save_interval_minutes: float = 10.0
    keep_last: int = 5
    average_last: int = 5
    valid_interval_steps: int = 0  # 0: validate only at the end
    valid_bleu: bool = False
    patience: int = 0  # validations without improvement before stopping; 0: never
    log_interval: int = 50
    compile: bool = False
    device: str = "auto"
    threads: int = 0  # 0: torch's default (OMP_NUM_THREADS)
    max_bad_steps: int = 5  # consecutive non-finite / out-of-memory updates before giving up

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if self.lr_schedule not in SCHEDULES:
            raise ValueError(f"lr_schedule must be one of {SCHEDULES}, got {self.lr_schedule!r}")
        if self.update_freq < 1 or self.max_tokens < 1:
            raise ValueError("update_freq and max_tokens must be positive")
        self.adam_betas = tuple(self.adam_betas)  # type: ignore[assignment]

    def resolved(self, d_model: int) -> "TrainConfig":
        """Fill derived fields: the paper's peak lr under "noam", and keep enough checkpoints to average."""
        lr = noam_peak_lr(d_model, self.warmup_steps) if self.lr_schedule == "noam" else self.lr
        keep = max(self.keep_last, self.average_last)
        return TrainConfig(**{**self.__dict__, "lr": lr, "keep_last": keep})


def noam_peak_lr(d_model: int, warmup_steps: int) -> float:
    """Peak of the paper's schedule, reached at step = warmup_steps: d_model^-0.5 * warmup^-0.5."""
    return d_model**-0.5 * max(warmup_steps, 1) ** -0.5


def learning_rate(step: int, peak_lr: float, warmup_steps: int) -> float:
    """Linear warm-up to `peak_lr`, then inverse square root (equals the paper's formula for its peak)."""
    step = max(step, 1)
    if warmup_steps <= 0:
        return peak_lr
    return peak_lr * min(step / warmup_steps, math.sqrt(warmup_steps / step))


def autocast_context(precision: str, device: torch.device) -> Any:
    if precision == "fp32":
        return nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


def fault_steps(name: str) -> set[int]:
    raw = os.environ.get(name, "")
    return {int(x) for x in raw.split(",") if x.strip()}


def fault_kill_rank(rank: int, attempt: int, run_dir: Path) -> None:
    """Die like a crashed node when FAULT_KILL_RANK names this rank and attempt; a marker file in
    RUN_DIR makes it happen once, so the restarted rank runs on."""
    if os.environ.get(FAULT_KILL_RANK, "").replace(" ", "") != f"{rank}:{attempt}":
        return
    marker = run_dir / f".fault-killed-rank{rank}-attempt{attempt}"
    if marker.exists():
        return
    marker.touch()
    os.kill(os.getpid(), signal.SIGKILL)


@dataclass
class StepResult:
    loss: float
    nll: float
    src_tokens: int
    tgt_tokens: int
    skipped: str = ""  # "", "nonfinite" or "oom"
    grad_norm: float = 0.0


def train_step(
    module: nn.Module,
    optimizer: torch.optim.Optimizer,
    scaler: Any,
    batches: list[Any],
    cfg: TrainConfig,
    ctx: DistContext,
    lr: float,
    attempt: int,
) -> StepResult:
    """One update over `batches` (update_freq micro-batches), normalized by target tokens over all ranks."""
    optimizer.zero_grad(set_to_none=True)
    local = [0.0, 0.0, 0.0, 0.0]  # loss, nll, src tokens, tgt tokens
    try:
        if attempt in fault_steps(FAULT_OOM):
            raise torch.OutOfMemoryError(f"injected out-of-memory at update attempt {attempt}")
        for i, batch in enumerate(batches):
            last = i == len(batches) - 1
            sync = nullcontext() if last or ctx.world_size == 1 else module.no_sync()
            with sync:
                with autocast_context(cfg.precision, ctx.device):
                    loss, nll = module(batch.src, batch.tgt_in, batch.tgt_out)
                if attempt in fault_steps(FAULT_NAN):
                    loss = loss * float("nan")
                (scaler.scale(loss) if scaler is not None else loss).backward()
            local = [local[0] + loss.item(), local[1] + nll.item(), local[2] + batch.src_tokens, local[3] + batch.tgt_tokens]
    except torch.OutOfMemoryError:
        if ctx.world_size > 1:
            raise  # ranks would fall out of step in their collectives; let the caller stop cleanly
        optimizer.zero_grad(set_to_none=True)
        if ctx.device.type == "cuda":
            torch.cuda.empty_cache()
        return StepResult(0.0, 0.0, 0, 0, skipped="oom")
    loss_sum, nll_sum, src_tokens, tgt_tokens = ctx.all_sum(local)
    if not math.isfinite(loss_sum):
        optimizer.zero_grad(set_to_none=True)
        return StepResult(loss_sum, nll_sum, int(src_tokens), int(tgt_tokens), skipped="nonfinite")
    if scaler is not None:
        scaler.unscale_(optimizer)
    # DDP averaged the gradients over ranks; rescale so the update is sum(loss) / all target tokens.
    scale = ctx.world_size / max(tgt_tokens, 1.0)
    params = [p for p in module.parameters() if p.grad is not None]
    torch._foreach_mul_([p.grad for p in params], scale)
    grad_norm = 0.0
    if cfg.clip_norm > 0:
        grad_norm = float(nn.utils.clip_grad_norm_(params, cfg.clip_norm))
    for group in optimizer.param_groups:
        group["lr"] = lr
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    tokens = max(tgt_tokens, 1.0)
    return StepResult(loss_sum / tokens, nll_sum / tokens, int(src_tokens), int(tgt_tokens), grad_norm=grad_norm)


@torch.no_grad()
def validate(module: LossModule, batches: list[Any], cfg: TrainConfig, ctx: DistContext) -> float:
    """Mean per-token NLL (natural log) on this rank's share of the valid batches, summed over ranks."""
    was_training = module.training
    module.eval()
    nll_sum, tokens = 0.0, 0.0
    for batch in batches:
        with autocast_context(cfg.precision, ctx.device):
            _, nll = module(batch.src, batch.tgt_in, batch.tgt_out)
        nll_sum += nll.item()
        tokens += batch.tgt_tokens
    module.train(was_training)
    nll_sum, tokens = ctx.all_sum([nll_sum, tokens])
    return nll_sum / max(tokens, 1.0)


@torch.no_grad()
def valid_bleu(model: nn.Module, data: Any, batches: list[Any], spm_model: bytes, tcfg: Any, device: torch.device) -> float:
    """sacreBLEU of the model's translations of the valid split (search settings of the recipe)."""
    from mtkit.data import collate
    from mtkit.score import score
    from mtkit.search import ModelDecoder, search
    from mtkit.tokenizer import Tokenizer

    tokenizer = Tokenizer.from_bytes(spm_model)
    decoder, c = ModelDecoder([model]), model.cfg
    hyps: list[str] = []
    refs: list[str] = []
    was_training = model.training
    model.eval()
    for idx in batches:
        src = collate(data, idx, c.pad_id, c.bos_id, c.eos_id).src.to(device)
        found = search(decoder, src, torch.as_tensor(data.src_lens[idx], device=device), tcfg,
                       c.bos_id, c.eos_id, c.pad_id, c.max_positions)
        hyps += tokenizer.decode([h[0].tokens if h else [] for h in found])
        refs += tokenizer.decode([data.tgt(i).tolist() for i in idx])
    model.train(was_training)
    return score(hyps, [refs]).bleu


def build_optimizer(model: nn.Module, cfg: TrainConfig, device: torch.device) -> torch.optim.Optimizer:
    """Adam as the paper (fused kernels on GPU, foreach on CPU)."""
    fused = device.type == "cuda"
    return torch.optim.Adam(
        model.parameters(),
        lr=cfg.lr,
        betas=cfg.adam_betas,
        eps=cfg.adam_eps,
        weight_decay=cfg.weight_decay,
        fused=fused or None,
        foreach=None if fused else True,
    )


def set_threads(cfg: TrainConfig) -> None:
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)


@dataclass
class TrainState:
    """Where the run is; everything needed to continue exactly (plain types only)."""

    step: int = 0
    epoch: int = 1
    position: int = 0  # batches of this rank's shard consumed in the current epoch
    attempts: int = 0  # update attempts, skipped ones included (fault injection counts these)
    wall: float = 0.0  # training seconds before this process started
    best_loss: float = math.inf
    best_step: int = 0
    stale: int = 0  # validations since the best one


class SignalFlag:
    """SIGINT/SIGTERM set a flag; the loop finishes its step, saves, then raises Interrupted."""

    def __init__(self) -> None:
        import signal

        self.signum = 0
        self._previous = {s: signal.signal(s, self._handle) for s in (signal.SIGINT, signal.SIGTERM)}

    def _handle(self, signum: int, frame: Any) -> None:
        self.signum = signum

    def restore(self) -> None:
        import signal

        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


def make_payload(model: nn.Module, optimizer: Any, scaler: Any, state: TrainState, rng: list[Tensor], extra: dict) -> dict:
    return {
        "kind": "train",
        "model": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "optimizer": optimizer.state_dict(),
        "scaler": scaler.state_dict() if scaler is not None else {},
        "state": dict(state.__dict__),
        "step": state.step,
        "rng": rng,
        **extra,
    }


def train(data_dir: Path, run_dir: Path, recipe: Any) -> dict | None:
    """Train, or resume the run in `run_dir`; returns a summary dict on rank 0 (None on the other ranks).
    `recipe` is a resolved mtkit.recipe.Recipe."""
    from mtkit.batching import epoch_batches
    from mtkit.checkpoint import prune_checkpoints, save_checkpoint, step_path, write_average
    from mtkit.data import ParallelData, collate, read_manifest
    from mtkit.errors import Interrupted, NumericalError, StorageError
    from mtkit.files import DirectoryLock
    from mtkit.model import Transformer
    from mtkit.rundir import MetricsLog, open_run

    cfg, mcfg = recipe.train, recipe.model
    ctx = setup_distributed(cfg.device)
    set_threads(cfg)
    data_dir, run_dir = Path(data_dir), Path(run_dir)
    manifest = read_manifest(data_dir)
    src_lang, tgt_lang = manifest["source_lang"], manifest["target_lang"]
    lock = DirectoryLock(run_dir)
    if ctx.is_main:
        lock.acquire()
    try:
        found = open_run(run_dir, data_dir, recipe.as_dict(), manifest, ctx.is_main)
        train_data = ParallelData.open(data_dir, "train", src_lang, tgt_lang)
        valid_data = ParallelData.open(data_dir, "valid", src_lang, tgt_lang) if "valid" in manifest["splits"] else None

        torch.manual_seed(cfg.seed)  # identical initial parameters on every rank
        model = Transformer(mcfg).to(ctx.device)
        module: nn.Module = LossModule(model, cfg.label_smoothing, mcfg.pad_id)
        optimizer = build_optimizer(model, cfg, ctx.device)
        scaler = torch.amp.GradScaler("cuda") if cfg.precision == "fp16" else None
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
        resumed_from = found[0] if found is not None else None
        if ctx.world_size > 1:
            module = nn.parallel.DistributedDataParallel(module, device_ids=[ctx.device] if ctx.device.type == "cuda" else None)
        if cfg.compile:
            module = torch.compile(module)
        module.train()
        spm_bytes = (data_dir / "spm.model").read_bytes()
        extra = {"configs": recipe.as_dict(), "spm_model": spm_bytes, "spm_sha256": manifest["spm_sha256"], "manifest": manifest}
        metrics = MetricsLog(run_dir, ctx.is_main, state.wall, state.step)
        valid_batches, bleu_idx = [], []
        if valid_data is not None:
            # BLEU is decoded on rank 0 over the whole split; the loss over each rank's shard
            bleu_idx = epoch_batches(valid_data.src_lens, valid_data.tgt_lens, cfg.max_tokens, 0, 1)
            valid_idx = epoch_batches(valid_data.src_lens, valid_data.tgt_lens, cfg.max_tokens, 0, 1, ctx.rank, ctx.world_size)
            valid_batches = [collate(valid_data, idx).to(ctx.device) for idx in valid_idx]

        def save() -> None:
            rng = rng_state(ctx)
            state.wall = metrics.wall()
            if ctx.is_main:
                save_checkpoint(step_path(run_dir, state.step), make_payload(model, optimizer, scaler, state, rng, extra))
                protect = [p for p in (resumed_from, step_path(run_dir, state.best_step)) if p is not None]
                prune_checkpoints(run_dir, cfg.keep_last, protect)

        def run_validation() -> bool:
            """Validate; returns True when patience is exhausted."""
            if not valid_batches:
                return False
            loss = validate(module, valid_batches, cfg, ctx)
            record = {"step": state.step, "valid_loss": round(loss, 4), "valid_ppl": round(math.exp(min(loss, 50)), 3)}
            if cfg.valid_bleu and ctx.is_main:
                record["valid_bleu"] = valid_bleu(model, valid_data, bleu_idx, spm_bytes, recipe.translate, ctx.device)
            if loss < state.best_loss:
                state.best_loss, state.best_step, state.stale = loss, state.step, 0
            else:
                state.stale += 1
            bleu = f" | bleu {record['valid_bleu']:.2f}" if "valid_bleu" in record else ""
            metrics.write(record, f"valid | step {state.step} | loss {loss:.3f} | ppl {record['valid_ppl']:.2f}{bleu} | "
                                  f"best step {state.best_step}")
            return cfg.patience > 0 and state.stale >= cfg.patience

        flag = SignalFlag()
        stop = ""
        bad = 0
        last_save = time.monotonic()
        saved_step = state.step
        window = [0.0, 0.0, 0, 0, 0, time.monotonic()]  # loss*tok, nll*tok, src, tgt, updates, t0
        try:
            while not stop:
                batches = epoch_batches(train_data.src_lens, train_data.tgt_lens, cfg.max_tokens, cfg.seed, state.epoch, ctx.rank, ctx.world_size)
                while state.position < len(batches) and not stop:
                    if cfg.max_steps and state.step >= cfg.max_steps:
                        stop = "max_steps"
                        break
                    group = [collate(train_data, idx).to(ctx.device) for idx in batches[state.position : state.position + cfg.update_freq]]
                    state.attempts += 1
                    fault_kill_rank(ctx.rank, state.attempts, run_dir)
                    lr = learning_rate(state.step + 1, cfg.lr, cfg.warmup_steps)
                    try:
                        result = train_step(module, optimizer, scaler, group, cfg, ctx, lr, state.attempts)
                    except torch.OutOfMemoryError:
                        raise StorageError(f"out of memory at step {state.step + 1} (distributed runs cannot skip a batch); lower train.max_tokens") from None
                    state.position += len(group)
                    if result.skipped:
                        bad += 1
                        metrics.write({"step": state.step, "skipped": result.skipped, "attempt": state.attempts},
                                      f"warning: step {state.step + 1}: {result.skipped} update skipped ({bad} in a row)")
                        error = NumericalError if result.skipped == "nonfinite" else StorageError
                        if bad > cfg.max_bad_steps:
                            what = "non-finite loss" if result.skipped == "nonfinite" else "out of memory"
                            raise error(f"{what} at step {state.step + 1}, {bad} updates in a row; last good checkpoint left intact")
                        continue
                    bad = 0
                    state.step += 1
                    window = [window[0] + result.loss * result.tgt_tokens, window[1] + result.nll * result.tgt_tokens,
                              window[2] + result.src_tokens, window[3] + result.tgt_tokens, window[4] + 1, window[5]]
                    if state.step % cfg.log_interval == 0:
                        log_interval(metrics, state, window, lr)
                        window = [0.0, 0.0, 0, 0, 0, time.monotonic()]
                    if cfg.valid_interval_steps and state.step % cfg.valid_interval_steps == 0 and run_validation():
                        stop = "patience"
                    elapsed = metrics.wall()
                    flags = ctx.all_sum([
                        float(flag.signum),
                        float(cfg.max_time_minutes > 0 and elapsed >= cfg.max_time_minutes * 60),
                        float(cfg.save_interval_minutes > 0 and time.monotonic() - last_save >= cfg.save_interval_minutes * 60),
                    ])
                    if flags[0]:
                        stop = "signal"
                    elif cfg.max_steps and state.step >= cfg.max_steps:
                        stop = "max_steps"
                    elif flags[1]:
                        stop = stop or "max_time"
                    due = (cfg.save_interval_steps and state.step % cfg.save_interval_steps == 0) or flags[2]
                    if due and not stop:
                        save()
                        last_save, saved_step = time.monotonic(), state.step
                if state.position >= len(batches):
                    state.epoch, state.position = state.epoch + 1, 0
                    if cfg.max_epochs and state.epoch > cfg.max_epochs:
                        stop = stop or "max_epochs"
        finally:
            flag.restore()
        validated_now = cfg.valid_interval_steps and state.step % cfg.valid_interval_steps == 0 and stop != "max_epochs"
        if stop != "signal" and not validated_now:
            run_validation()
        if state.step != saved_step or found is None:
            save()
        if stop == "signal":
            raise Interrupted(flag.signum)
        if not ctx.is_main:
            return None  # one summary per run: the CLI prints rank 0's
        averaged, _ = write_average(run_dir, cfg.average_last)
        return {"stop": stop, "step": state.step, "epoch": state.epoch, "wall": round(metrics.wall(), 1),
                "best_step": state.best_step, "best_valid_loss": state.best_loss, "average": str(averaged)}
    finally:
        lock.release()
        if ctx.world_size > 1 and dist.is_initialized():
            dist.destroy_process_group()


def log_interval(metrics: Any, state: TrainState, window: list, lr: float) -> None:
    """One metrics.jsonl record and one console line for the updates since the last log."""
    seconds = max(time.monotonic() - window[5], 1e-9)
    tokens = max(window[3], 1)
    loss, nll = window[0] / tokens, window[1] / tokens
    record = {
        "step": state.step, "epoch": state.epoch, "loss": round(loss, 4), "nll": round(nll, 4),
        "ppl": round(math.exp(min(nll, 50)), 3), "lr": lr, "src_tokens": int(window[2]), "tgt_tokens": int(window[3]),
        "tokens_per_s": round((window[2] + window[3]) / seconds, 1), "updates": int(window[4]),
    }
    metrics.write(record, f"step {state.step} | epoch {state.epoch} | loss {loss:.3f} | ppl {record['ppl']:.2f} | "
                          f"lr {lr:.3g} | {record['tokens_per_s']:.0f} tok/s | {metrics.wall():.0f}s")
