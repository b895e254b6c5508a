"""Run by tests/gpu/test_cuda.py under torchrun (one process): mtkit's update through DDP over NCCL (gloo with
`cpu`), against the same updates of the same model without DDP. Prints one JSON line.

  python -m torch.distributed.run --standalone --nproc-per-node 1 tests/gpu/ddp_worker.py DATA_DIR cuda
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist

STEPS = 3


def updated_params(module: torch.nn.Module, wrap: bool, batches: list, ctx) -> dict[str, torch.Tensor]:
    """Parameters after STEPS updates of mtkit's train_step, the loss module wrapped in DDP as start_run does."""
    from mtkit.training.step import train_step

    optimizer = torch.optim.Adam(module.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9)
    ids = [ctx.device] if ctx.device.type == "cuda" else None
    wrapped = torch.nn.parallel.DistributedDataParallel(module, device_ids=ids) if wrap else module
    for step in range(1, STEPS + 1):
        result = train_step(wrapped, optimizer, None, batches, ctx, 1e-3, step, "fp32")
        if result.skipped or not math.isfinite(result.loss):
            raise SystemExit(
                f"update {step} {'with' if wrap else 'without'} DDP: skipped={result.skipped!r} loss={result.loss}"
            )
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def main(data_dir: Path, device_name: str) -> None:
    from mtkit.corpus.binarized import ParallelData, collate, read_manifest
    from mtkit.model.transformer import ModelConfig, Transformer
    from mtkit.training.distributed import DistContext
    from mtkit.training.loss import LossModule

    local_rank = int(os.environ["LOCAL_RANK"])
    device = torch.device("cuda", local_rank) if device_name == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend)  # env:// rendezvous from torchrun
    try:
        probe = torch.full((4,), 2.0, device=device)
        dist.all_reduce(probe)
        manifest = read_manifest(data_dir)
        data = ParallelData.open(data_dir, "train", manifest["source_lang"], manifest["target_lang"])
        batches = [collate(data, list(range(i, i + 32))).to(device) for i in (0, 32)]
        cfg = ModelConfig.preset("tiny", vocab_size=manifest["vocab_size"], dropout=0.0)
        ctx = DistContext(rank=dist.get_rank(), world_size=dist.get_world_size(), device=device)
        params = {}
        for wrap in (True, False):
            torch.manual_seed(1)
            params[wrap] = updated_params(LossModule(Transformer(cfg).to(device), 0.1, cfg.pad_id), wrap, batches, ctx)
        worst = max((params[True][k] - params[False][k]).abs().max().item() for k in params[True])
        moved = max((params[False][k] - v).abs().max().item() for k, v in initial(cfg, device).items())
        print(
            json.dumps(
                {
                    "backend": backend,
                    "world_size": ctx.world_size,
                    "probe": probe.tolist(),
                    "max_abs_param_diff_vs_no_ddp": worst,
                    "max_abs_param_change": moved,
                }
            )
        )
    finally:
        dist.destroy_process_group()


def initial(cfg, device: torch.device) -> dict[str, torch.Tensor]:
    """The parameters both runs started from (seed 1), to show that the updates moved them."""
    from mtkit.model.transformer import Transformer
    from mtkit.training.loss import LossModule

    torch.manual_seed(1)
    return LossModule(Transformer(cfg).to(device), 0.1, cfg.pad_id).state_dict()


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
