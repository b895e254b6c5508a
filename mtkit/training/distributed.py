"""Distributed context under torchrun: process group set-up (gloo on CPU, NCCL on GPU), scalar
all-reduce, and every rank's RNG state for exact resume. torch only; never a launcher of its own.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor, nn


@dataclass
class DistContext:
    rank: int
    world_size: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def all_sum_with(self, on_device: Tensor, on_host: list[float]) -> list[float]:
        """Sum device scalars [n] and host numbers over ranks in one all-reduce; the one host sync.

        Device values are never read one by one (each `.item()` would wait for the GPU); the host values
        travel through pinned memory with a non-blocking copy, so the GPU stream is not synchronised early.
        """
        if self.world_size == 1:
            return on_device.double().tolist() + list(on_host)
        host = torch.tensor(on_host, dtype=torch.float64)
        if self.device.type == "cuda":
            host = host.pin_memory()
        packed = torch.cat([on_device.double(), host.to(self.device, non_blocking=True)])
        dist.all_reduce(packed)
        return packed.tolist()

    def broadcast_object(self, value: Any) -> Any:
        """Rank 0's `value` on every rank (picklable; identity in a single process)."""
        if self.world_size == 1:
            return value
        box = [value]
        dist.broadcast_object_list(box, src=0, device=self.device if self.device.type == "cuda" else None)
        return box[0]

    def all_gather_object(self, value: Any) -> list[Any]:
        """Every rank's `value`, in rank order, on every rank (picklable; [value] in a single process)."""
        if self.world_size == 1:
            return [value]
        gathered: list[Any] = [None] * self.world_size
        dist.all_gather_object(gathered, value)
        return gathered

    def map_shared(self, items: Sequence[Any], work: Callable[[Any], list[Any]]) -> list[Any]:
        """`work` over this rank's share of `items` (every world_size-th, from its rank), the results of all
        ranks concatenated in the order of `items` on every rank: the same list as one process would make."""
        mine = [work(item) for item in items[self.rank :: self.world_size]]
        shares = self.all_gather_object(mine)
        ordered = [shares[i % self.world_size][i // self.world_size] for i in range(len(items))]
        return [result for results in ordered for result in results]


def wrap_ddp(module: nn.Module, ctx: DistContext, bf16_compress: bool = False) -> nn.Module:
    """DDP over `module` without a buffer broadcast per forward (the model's buffers are constants, identical on
    every rank from the seed) and with gradients stored as views of the all-reduce buckets (no copy in and out
    per update, one gradient-sized buffer less). `bf16_compress` all-reduces the gradients in bf16 (half the
    traffic: 857 MB -> 428 MB per `big` update) and averages them back in float32; it needs NCCL (CUDA).

    Raises:
        ValueError: bf16_compress off CUDA (torch's hook refuses gloo).
    """
    import inspect

    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import bf16_compress_hook

    if bf16_compress and ctx.device.type != "cuda":
        raise ValueError("bf16 gradient compression needs CUDA (NCCL)")
    # torch 2.13 renamed broadcast_buffers (deprecated) to forward_sync_buffers; both stop the per-forward sync.
    params = inspect.signature(nn.parallel.DistributedDataParallel).parameters
    no_sync = {"forward_sync_buffers": False} if "forward_sync_buffers" in params else {"broadcast_buffers": False}
    ddp = nn.parallel.DistributedDataParallel(
        module, device_ids=[ctx.device] if ctx.device.type == "cuda" else None, gradient_as_bucket_view=True, **no_sync
    )
    if bf16_compress:
        ddp.register_comm_hook(None, bf16_compress_hook)
    return ddp


def training_device(name: str, local_rank: int = 0) -> torch.device:
    """train.device as a training process takes it: auto is this rank's GPU when CUDA is available, else the CPU."""
    use_cuda = name == "cuda" or (name == "auto" and torch.cuda.is_available())
    return torch.device("cuda", local_rank) if use_cuda else torch.device("cpu")


def setup_distributed(device_name: str, timeout_minutes: float = 30.0) -> DistContext:
    """torchrun sets WORLD_SIZE/RANK/LOCAL_RANK; gloo on CPU, NCCL on GPU.

    `timeout_minutes` bounds every collective: a rank waits that long for the others (rank 0 may be writing a
    checkpoint or decoding validation BLEU); a dead process is noticed sooner, by torchrun."""
    import datetime

    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = training_device(device_name, local_rank)
    use_cuda = device.type == "cuda"
    if use_cuda:
        torch.cuda.set_device(device)
    if world > 1 and not dist.is_initialized():
        backend = "nccl" if use_cuda else "gloo"
        timeout = datetime.timedelta(minutes=timeout_minutes)
        dist.init_process_group(
            backend, store=restart_store(rank, world, timeout), rank=rank, world_size=world, timeout=timeout
        )
    return DistContext(rank=rank, world_size=world, device=device)


def restart_store(rank: int, world: int, timeout: Any) -> dist.Store:
    """torchrun's rendezvous store under a prefix per restart: after `--max-restarts` it still holds the
    failed attempt's keys (the dead ranks' gloo addresses), and the new ranks would wait on those."""
    from torch.distributed.rendezvous import rendezvous

    store, _, _ = next(rendezvous("env://", rank, world, timeout=timeout))
    return dist.PrefixStore(f"mtkit/restart_{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}", store)


def rng_state(ctx: DistContext) -> list[Tensor]:
    """Every rank's CPU (and CUDA) generator state, gathered so rank 0 can save all of them."""
    state = torch.get_rng_state()
    if ctx.device.type == "cuda":
        state = torch.cat([state, torch.cuda.get_rng_state(ctx.device)])
    if ctx.world_size == 1:
        return [state]
    gathered = [torch.empty_like(state) for _ in range(ctx.world_size)]
    dist.all_gather_object(gathered, state)
    return gathered


def restore_rng(states: list[Tensor], ctx: DistContext) -> None:
    if len(states) != ctx.world_size:
        return  # a different world size cannot continue the same random streams
    state = states[ctx.rank]
    cpu_len = torch.get_rng_state().numel()
    torch.set_rng_state(state[:cpu_len].clone())
    if ctx.device.type == "cuda" and state.numel() > cpu_len:
        torch.cuda.set_rng_state(state[cpu_len:].clone(), ctx.device)
