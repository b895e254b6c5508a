"""DistContext's collectives over two real gloo processes: broadcast, gather, and work shared by rank."""

from __future__ import annotations

import os
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from mtkit.training.distributed import DistContext


def _rank_main(rank: int, world: int, init_file: str, out_dir: str) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    ctx = DistContext(rank=rank, world_size=world, device=torch.device("cpu"))
    done: list[int] = []

    def work(item: int) -> list[tuple[int, int]]:
        done.append(item)
        return [(item, rank), (item * 10, rank)]

    results = ctx.map_shared(list(range(7)), work)
    chosen = ctx.broadcast_object(("step_00000004.pt", 4) if rank == 0 else None)
    torch.save(
        {"results": results, "done": done, "chosen": chosen, "gathered": ctx.all_gather_object(rank * 2)},
        Path(out_dir) / f"rank{rank}.pt",
    )
    dist.destroy_process_group()


def test_two_ranks_share_work_and_agree(tmp_path: Path) -> None:
    mp.spawn(_rank_main, args=(2, str(tmp_path / "init"), str(tmp_path)), nprocs=2, join=True)
    outs = [torch.load(tmp_path / f"rank{rank}.pt") for rank in range(2)]
    assert outs[0]["done"] == [0, 2, 4, 6] and outs[1]["done"] == [1, 3, 5]  # each item decoded once
    expected = [value for item in range(7) for value in (item, item * 10)]
    for out in outs:
        assert [value for value, _ in out["results"]] == expected  # one process's order, on every rank
        assert [rank for _, rank in out["results"][::2]] == [0, 1, 0, 1, 0, 1, 0]
        assert out["chosen"] == ("step_00000004.pt", 4) and out["gathered"] == [0, 2]


def test_single_process_is_the_identity() -> None:
    ctx = DistContext(rank=0, world_size=1, device=torch.device("cpu"))
    assert ctx.map_shared(["a", "b"], lambda x: [x * 2]) == ["aa", "bb"]
    assert ctx.broadcast_object(3) == 3 and ctx.all_gather_object(3) == [3]
