"""One training update: a group of micro-batches under autocast, gradients normalized by every target token
over all ranks, clipping, the optimizer step, and a skip (nothing changed) on a non-finite loss or out of
memory; validation loss and BLEU. Settings come as arguments: TrainConfig and the loop are mtkit/training/loop.py.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from mtkit.faults import NAN_STEPS, OOM_STEPS, armed
from mtkit.training.distributed import DistContext
from mtkit.training.loss import LossModule


def autocast_context(precision: str, device: torch.device) -> Any:
    if precision == "fp32":
        return nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


@dataclass
class StepResult:
    loss: float
    nll: float
    src_tokens: int
    tgt_tokens: int
    skipped: str = ""  # "", "nonfinite", "oom" or "overflow" (fp16: the loss scaler skipped the optimizer step)
    grad_norm: Tensor | None = None  # a device scalar: reading it waits for the device, so only when logged
    flags: list[float] = field(default_factory=list)  # the caller's flags, summed over ranks


def train_step(
    module: nn.Module,
    optimizer: torch.optim.Optimizer,
    scaler: Any,
    batches: list[Any],
    ctx: DistContext,
    lr: float,
    attempt: int,
    precision: str = "fp32",
    clip_norm: float = 0.0,
    flags: Sequence[float] = (),
) -> StepResult:
    """One update over `batches` (update_freq micro-batches), normalized by target tokens over all ranks.

    The host waits for the device once per update: the loss sums stay on the device until one all-reduce
    that also carries the token counts and the caller's `flags` (summed over ranks into `StepResult.flags`).
    """
    optimizer.zero_grad(set_to_none=True)
    sums = torch.zeros(2, dtype=torch.float64, device=ctx.device)  # loss, nll of this rank's micro-batches
    src_tokens = tgt_tokens = 0
    nan = attempt in (armed(NAN_STEPS) or ())  # asked once per update, not per micro-batch
    try:
        if attempt in (armed(OOM_STEPS) or ()):
            raise torch.OutOfMemoryError(f"injected out-of-memory at update attempt {attempt}")
        for i, batch in enumerate(batches):
            last = i == len(batches) - 1
            sync = nullcontext() if last or ctx.world_size == 1 else module.no_sync()
            with sync:
                with autocast_context(precision, ctx.device):
                    loss, nll = module(batch.src, batch.tgt_in, batch.tgt_out)
                if nan:
                    loss = loss * float("nan")
                (scaler.scale(loss) if scaler is not None else loss).backward()
            sums += torch.stack([loss.detach(), nll.detach()]).double()
            src_tokens, tgt_tokens = src_tokens + batch.src_tokens, tgt_tokens + batch.tgt_tokens
    except torch.OutOfMemoryError:
        if ctx.world_size > 1:
            raise  # ranks would fall out of step in their collectives; let the caller stop cleanly
        optimizer.zero_grad(set_to_none=True)
        if ctx.device.type == "cuda":
            torch.cuda.empty_cache()
        return StepResult(0.0, 0.0, 0, 0, skipped="oom", flags=list(flags))
    loss_sum, nll_sum, all_src, all_tgt, *summed_flags = ctx.all_sum_with(sums, [src_tokens, tgt_tokens, *flags])
    if not math.isfinite(loss_sum):
        optimizer.zero_grad(set_to_none=True)
        return StepResult(loss_sum, nll_sum, int(all_src), int(all_tgt), skipped="nonfinite", flags=summed_flags)
    # DDP averaged the gradients over ranks; rescale so the update is sum(loss) / all target tokens.
    grad_norm, stepped = apply_update(module, optimizer, scaler, ctx.world_size / max(all_tgt, 1.0), lr, clip_norm)
    tokens = max(all_tgt, 1.0)
    return StepResult(
        loss_sum / tokens,
        nll_sum / tokens,
        int(all_src),
        int(all_tgt),
        grad_norm=grad_norm,
        flags=summed_flags,
        skipped="" if stepped else "overflow",
    )


def apply_update(
    module: nn.Module, optimizer: torch.optim.Optimizer, scaler: Any, scale: float, lr: float, clip_norm: float
) -> tuple[Tensor | None, bool]:
    """Scale the summed gradients, clip them, and step at `lr`; returns the gradient norm (None without
    clipping) as a device scalar, unread, and whether the optimizer stepped (False: fp16 overflow, which the
    scaler skipped and answered by lowering its scale; the same decision on every rank, whose gradients
    are identical after DDP's all-reduce)."""
    if scaler is not None:
        scaler.unscale_(optimizer)
    params = [p for p in module.parameters() if p.grad is not None]
    torch._foreach_mul_([p.grad for p in params], scale)
    grad_norm = None
    if clip_norm > 0:
        grad_norm = nn.utils.clip_grad_norm_(params, clip_norm)
    for group in optimizer.param_groups:
        group["lr"] = lr
    if scaler is None:
        optimizer.step()
        return grad_norm, True
    scale = scaler.get_scale()  # a host read, in fp16 runs only
    scaler.step(optimizer)
    scaler.update()
    return grad_norm, scaler.get_scale() >= scale


@torch.no_grad()
def validate_sums(
    module: LossModule, batches: list[Any], ctx: DistContext, precision: str = "fp32"
) -> tuple[float, float]:
    """(summed NLL, target tokens) of the valid batches, summed over ranks."""
    was_training = module.training
    module.eval()
    nll_sum, tokens = torch.zeros(1, dtype=torch.float64, device=ctx.device), 0
    for batch in batches:
        with autocast_context(precision, ctx.device):
            _, nll = module(batch.src, batch.tgt_in, batch.tgt_out)
        nll_sum += nll.double()  # read once at the end: no wait on the device per batch
        tokens += batch.tgt_tokens
    module.train(was_training)
    nll_sum, tokens = ctx.all_sum_with(nll_sum, [tokens])
    return nll_sum, tokens


def validation_record(
    module: LossModule,
    model: nn.Module,
    validations: dict[str, Validation],
    ctx: DistContext,
    cfg: Any,
    spm_model: bytes,
    tcfg: Any,
) -> tuple[float, dict[str, float]]:
    """The valid loss of all language pairs pooled (their tokens together: what the best step and patience follow)
    and the metrics record: valid_loss, valid_ppl, valid_bleu (the mean of the pairs' BLEU), and with several pairs
    the same per pair as valid_loss/en-de, valid_ppl/en-de, valid_bleu/en-de. `cfg` is the TrainConfig."""
    sums = {pair: validate_sums(module, v.batches, ctx, cfg.precision) for pair, v in validations.items()}
    loss = sum(nll for nll, _ in sums.values()) / max(sum(tokens for _, tokens in sums.values()), 1.0)
    record = {"valid_loss": round(loss, 4), "valid_ppl": round(math.exp(min(loss, 50)), 3)}
    several = len(validations) > 1
    for pair, (nll, tokens) in sums.items() if several else ():
        pair_loss = nll / max(tokens, 1.0)
        record[f"valid_loss/{pair}"] = round(pair_loss, 4)
        record[f"valid_ppl/{pair}"] = round(math.exp(min(pair_loss, 50)), 3)
    if cfg.valid_bleu:  # every rank decodes a share
        bleus = {
            pair: valid_bleu(model, v.data, v.bleu_batches, spm_model, tcfg, ctx) for pair, v in validations.items()
        }
        record["valid_bleu"] = sum(bleus.values()) / len(bleus)
        record.update({f"valid_bleu/{pair}": bleu for pair, bleu in bleus.items()} if several else {})
    return loss, record


@torch.no_grad()
def valid_bleu(model: nn.Module, data: Any, batches: list[Any], spm_model: bytes, tcfg: Any, ctx: DistContext) -> float:
    """sacreBLEU of the model's translations of the valid split (search settings of the recipe), the same on
    every rank: each rank decodes its share of `batches` and the sentences are gathered in order."""
    from mtkit.corpus.binarized import collate
    from mtkit.corpus.term_hints import term_piece_ids
    from mtkit.score import score
    from mtkit.search.beam import search
    from mtkit.search.step import ModelDecoder, SearchBatch
    from mtkit.tokenizer import tokenizer_from_bytes

    tokenizer = tokenizer_from_bytes(spm_model)
    # a run trained with term hints is scored as the engines translate it: its reserved pieces never emitted
    decoder, c = ModelDecoder([model], suppressed=term_piece_ids(tokenizer)), model.cfg
    device = ctx.device

    def translate(idx: Any) -> list[tuple[str, str]]:
        src = collate(data, idx, c.pad_id, c.bos_id, c.eos_id).src.to(device)
        lens = torch.as_tensor(data.src_lens[idx], device=device)
        found = search(decoder, SearchBatch(src, lens, c.pad_id, c.start_id, c.eos_id, c.max_positions), tcfg)
        hyps = tokenizer.decode([h[0].tokens if h else [] for h in found])
        return list(zip(hyps, tokenizer.decode([data.tgt(i).tolist() for i in idx])))

    was_training = model.training
    model.eval()
    pairs = ctx.map_shared(batches, translate)
    model.train(was_training)
    return score([hyp for hyp, _ in pairs], [[ref for _, ref in pairs]]).bleu


@dataclass
class Validation:
    """The valid split as training checks it: the loss over this rank's shard, BLEU over all of it (shared by ranks)."""

    data: Any  # mtkit.corpus.binarized.ParallelData
    batches: list[Any]  # this rank's shard, collated on the device
    bleu_batches: list[Any]  # sentence indices of the whole split


def token_ids(mcfg: Any) -> tuple[int, int, int]:
    """(pad, bos, eos), bos the decoder's start token (ModelConfig.start_id): what collate writes around each
    sentence."""
    return mcfg.pad_id, mcfg.start_id, mcfg.eos_id


def validation_sets(valid: dict[str, Any], cfg: Any, ctx: DistContext, mcfg: Any) -> dict[str, Validation]:
    """Language pair -> its valid set collated on the device (valid: pair -> mtkit.corpus.binarized.ParallelData)."""
    sets = {pair: validation_set(data, cfg, ctx, mcfg) for pair, data in valid.items()}
    return {pair: v for pair, v in sets.items() if v is not None}


def validation_set(data: Any, cfg: Any, ctx: DistContext, mcfg: Any) -> Validation | None:
    """The valid split collated on the device once (cfg: the TrainConfig, mcfg: the ModelConfig)."""
    from mtkit.corpus.batching import epoch_batches
    from mtkit.corpus.binarized import collate

    if data is None:
        return None
    multiple = pad_multiple(cfg, ctx.device)
    drawn = fitting_pairs(data, mcfg.max_positions - 1, ctx.is_main)
    bleu_batches = epoch_batches(data.src_lens, data.tgt_lens, cfg.max_tokens, 0, 1, drawn=drawn)
    shard = epoch_batches(
        data.src_lens,
        data.tgt_lens,
        cfg.max_tokens,
        0,
        1,
        ctx.rank,
        ctx.world_size,
        pad_multiple=multiple,
        drawn=drawn,
    )
    return Validation(
        data,
        [collate(data, idx, *token_ids(mcfg), pad_multiple=multiple).to(ctx.device) for idx in shard],
        bleu_batches,
    )


def fitting_pairs(data: Any, longest: int, say: bool) -> np.ndarray | None:
    """The valid pairs whose sides the model can take (`longest` tokens, its positions less the start or end token),
    or None for all. preprocess keeps a valid split whole (its `max_len` filters training pairs only), and a pair
    over the model's positions (a catalog's help text of many lines joined) would stop the run at its first
    validation, at the latest after the whole budget: it is left out of the loss and BLEU, and said once (`say`)."""
    from mtkit.console import warn

    fits = (data.src_lens <= longest) & (data.tgt_lens <= longest)
    if fits.all():
        return None
    if say:
        left = int((~fits).sum())
        warn(
            f"valid: {left:,} of {len(fits):,} pairs longer than the model's {longest:,} tokens left out of validation"
        )
    return np.flatnonzero(fits)


def pad_multiple(cfg: Any, device: torch.device) -> int:
    """Padded lengths rounded up to 8 on CUDA or compiled: a bounded set of shapes (an epoch of Multi30k at
    4,096 tokens: 45 instead of 211, one per batch), so compiled graphs and attention kernels are not rebuilt per
    batch, and tensor-core friendly sizes. 1 on CPU, where a shape costs nothing and padding costs compute."""
    return 8 if device.type == "cuda" or cfg.compile else 1


def build_optimizer(model: nn.Module, cfg: Any, device: torch.device) -> torch.optim.Optimizer:
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


def make_scaler(precision: str) -> Any:
    """fp16's dynamic loss scaler (None otherwise): it skips an update whose gradients overflowed."""
    return torch.amp.GradScaler("cuda") if precision == "fp16" else None
