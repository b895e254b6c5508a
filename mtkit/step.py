"""One training update and what sets it up: TrainConfig, the learning-rate schedule, Adam, autocast, the
update over a group of micro-batches (skipped on a non-finite loss or out of memory), validation loss and
BLEU, and the fault injection the reliability tests use. The loop that calls them is mtkit/train.py.
"""

from __future__ import annotations

import math
import os
import signal
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from mtkit.distributed import DistContext
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
