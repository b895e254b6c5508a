"""One process's measurement of mtkit's training update on CPU, for the step_flops scenario: the demo recipe's run
built by training's own start_run, updates by the loop's own update(), a matmul peak, tokens/s over a window of
timed updates after warm-up, a torch.profiler profile of a few updates grouped by what the time is spent on, and
with train.compile the graphs compiled. Prints one `RESULT {json}` line; the scenario turns it into FLOP/s.

The profile's labels come from wrapping, not changing, mtkit's attention, loss and dropout in this process only.
The grouping (`group_of`, `group_shares`) is pure, so it is tested on hand-written event paths.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from flops import RECIPE, matmul_gflops

UPDATE, DATA, LOSS = "step_flops.update", "step_flops.data", "step_flops.loss"
ATTENTION, DROPOUT = "step_flops.attention", "step_flops.dropout"
# Regions, outermost first: an op inside one counts for it whatever the op is. The optimizer region is torch's own
# record of Optimizer.step (and zero_grad); the _foreach ops outside it are apply_update's gradient scaling and
# clipping. Backward work is recognised by its autograd node: the loss's own Function, and attention's batched
# GEMMs (4-D torch.matmul: Bmm), softmax and masking, which no other part of the model runs; mtkit's dropout
# (mask drawing, its cast and multiply) by its own Function.
REGIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("data", (DATA,)),
    ("optimizer", ("Optimizer.step", "Optimizer.zero_grad", "aten::_foreach_", "clip_grad_norm")),
    ("loss", (LOSS, "_ProjectedSmoothedCrossEntropy")),
    ("attention", (ATTENTION, "BmmBackward", "SoftmaxBackward", "MaskedFillBackward")),
    ("dropout", (DROPOUT, "_ScaleByMaskBackward")),
)
SOFTMAX = ("aten::softmax", "aten::_softmax", "SoftmaxBackward")
# Ops, nearest the leaf first: the kernels an op runs count for the op that called them.
OPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("softmax", SOFTMAX),
    ("layer_norm", ("aten::layer_norm", "aten::native_layer_norm", "NativeLayerNormBackward")),
    ("casts", ("aten::_to_copy", "ToCopyBackward")),
    (
        "matmul",
        (
            "aten::mm",
            "aten::addmm",
            "aten::bmm",
            "aten::matmul",
            "aten::linear",
            "mkldnn::_linear_pointwise",
            "_LinearBackward",
            "MmBackward",
            "AddmmBackward",
        ),
    ),
)
GROUPS = ("matmul", "attention", "softmax", "layer_norm", "dropout", "casts", "loss", "optimizer", "data", "other")


def _matches(name: str, patterns: Sequence[str]) -> bool:
    return any(p in name for p in patterns)


def group_of(path: Sequence[str]) -> str:
    """The group of an op's self time, from the names of its enclosing events, outermost first, itself last.

    The outermost region wins (data, optimizer, loss, attention, dropout); inside attention, softmax is its own group.
    Outside the regions the op nearest the leaf that has a group decides (matmul, softmax, layer_norm, casts), else
    other.
    """
    for group, patterns in REGIONS:
        if any(_matches(name, patterns) for name in path):
            if group == "attention" and any(_matches(name, SOFTMAX) for name in path):
                return "softmax"
            return group
    for name in reversed(path):
        for group, patterns in OPS:
            if _matches(name, patterns):
                return group
    return "other"


def group_shares(rows: Sequence[tuple[Sequence[str], float]]) -> tuple[dict[str, float], dict[str, float]]:
    """Each group's share of the summed self time of (path, self microseconds) rows, every group present, and
    the ten ops of `other` with the most self time (microseconds), so the table says what it holds."""
    totals: dict[str, float] = dict.fromkeys(GROUPS, 0.0)
    other: dict[str, float] = defaultdict(float)
    for path, self_us in rows:
        group = group_of(path)
        totals[group] += self_us
        if group == "other":
            other[path[-1]] += self_us
    whole = sum(totals.values()) or 1.0
    top = dict(sorted(other.items(), key=lambda item: -item[1])[:10])
    return {g: round(t / whole, 4) for g, t in totals.items()}, {k: round(v) for k, v in top.items()}


def profile_rows(events: Any) -> Iterator[tuple[tuple[str, ...], float]]:
    """(names from the outermost event down to the op, its self CPU microseconds) of every event inside an update."""
    for event in events:
        path, parent = [event.name], event.cpu_parent
        while parent is not None:
            path.append(parent.name)
            parent = parent.cpu_parent
        if UPDATE in path:
            yield tuple(reversed(path)), float(event.self_cpu_time_total)


def label(function: Any, name: str) -> Any:
    """`function` run inside a profiler record named `name`."""
    import torch

    def labelled(*args: Any, **kwargs: Any) -> Any:
        with torch.profiler.record_function(name):
            return function(*args, **kwargs)

    return labelled


def build(args: argparse.Namespace, run_dir: Path) -> tuple[Any, Any]:
    """The demo recipe's run as `mtkit train` starts it (mtkit.training.run.start_run), with this program's
    precision, threads and compile setting; the optimizer swapped for a fused Adam when asked."""
    import torch

    from mtkit.corpus.binarized import read_manifest
    from mtkit.recipe import resolve_recipe
    from mtkit.training.data import open_training_data
    from mtkit.training.distributed import setup_distributed
    from mtkit.training.loop import configure_cpu, resolve_train_precision
    from mtkit.training.run import start_run

    manifest = read_manifest(args.data)
    sets = [f"train.precision='{args.precision}'", f"train.threads={args.threads}", "train.save_interval_minutes=0"]
    sets += ["train.compile=true"] if args.compile else []
    recipe = resolve_recipe(RECIPE, None, sets, vocab_size=manifest["vocab_size"])
    ctx = setup_distributed(recipe.train.device, recipe.train.dist_timeout_minutes)
    configure_cpu(recipe.train)
    recipe = resolve_train_precision(recipe, ctx.device)
    data = open_training_data(args.data, manifest, None, recipe.train, True)
    run, train_data = start_run(args.data, run_dir, recipe, manifest, data, ctx)
    if args.optimizer == "fused":
        cfg = run.cfg
        run.optimizer = torch.optim.Adam(
            run.model.parameters(),
            lr=cfg.lr,
            betas=cfg.adam_betas,
            eps=cfg.adam_eps,
            weight_decay=cfg.weight_decay,
            fused=True,
        )
    return run, train_data


def batch_indices(run: Any, train_data: Any) -> tuple[list[Any], int]:
    """The first epoch's batches as the loop draws them, and the padding multiple it collates them with."""
    from mtkit.corpus.batching import epoch_batches
    from mtkit.corpus.mixing import epoch_draw
    from mtkit.training.step import pad_multiple

    multiple = pad_multiple(run.cfg, run.ctx.device)
    cfg = run.cfg
    drawn = epoch_draw(run.mixture, cfg.seed, 0)
    batches = epoch_batches(
        train_data.src_lens, train_data.tgt_lens, cfg.max_tokens, cfg.seed, 0, pad_multiple=multiple, drawn=drawn
    )
    return batches, multiple


def compiled_graphs() -> int:
    """Graphs torch.compile has built in this process so far (the first compile and every recompile)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def timed_updates(run: Any, train_data: Any, count: int, start: int) -> list[dict[str, float]]:
    """`count` updates through the loop's update() from batch `start` on, the batches collated ahead on a background
    thread as the loop does (prefetch_groups); per update: seconds, tokens and graphs compiled during it."""
    from mtkit.corpus.binarized import prefetch_groups
    from mtkit.training.loop import update
    from mtkit.training.state import SignalFlag
    from mtkit.training.step import token_ids

    batches, multiple = batch_indices(run, train_data)
    ids = token_ids(run.model.cfg)
    groups = prefetch_groups(train_data, batches, start, 1, run.ctx.device, pad_multiple=multiple, token_ids=ids)
    flag, records = SignalFlag(), []
    try:
        for _, group in zip(range(count), groups):
            graphs = compiled_graphs() if run.cfg.compile else 0
            begin = time.perf_counter()
            update(run, group, 1, flag)
            seconds = time.perf_counter() - begin
            records.append(
                {
                    "seconds": seconds,
                    "src_tokens": sum(b.src_tokens for b in group),
                    "tgt_tokens": sum(b.tgt_tokens for b in group),
                    "graphs": (compiled_graphs() - graphs) if run.cfg.compile else 0,
                }
            )
    finally:
        groups.close()
        flag.restore()
    return records


def profiled_updates(run: Any, train_data: Any, count: int, start: int) -> tuple[dict, dict, float]:
    """Group shares of `count` profiled updates (batches collated in the update, inside the data region), the top
    ops of `other`, and the profiled updates' mean wall seconds."""
    import torch

    import mtkit.model.layers as layers
    import mtkit.model.transformer as transformer
    import mtkit.training.loss as loss
    from mtkit.corpus.binarized import collate
    from mtkit.training.loop import update
    from mtkit.training.state import SignalFlag
    from mtkit.training.step import token_ids

    batches, multiple = batch_indices(run, train_data)
    ids = token_ids(run.model.cfg)
    saved = transformer.attention, loss.label_smoothed_loss, layers.Dropout.forward
    transformer.attention, loss.label_smoothed_loss = label(saved[0], ATTENTION), label(saved[1], LOSS)
    layers.Dropout.forward = label(saved[2], DROPOUT)
    flag = SignalFlag()
    try:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            begin = time.perf_counter()
            for indices in batches[start : start + count]:
                with torch.profiler.record_function(UPDATE):
                    with torch.profiler.record_function(DATA):
                        group = [collate(train_data, indices, *ids, pad_multiple=multiple)]
                    update(run, group, 1, flag)
            seconds = (time.perf_counter() - begin) / count
    finally:
        transformer.attention, loss.label_smoothed_loss, layers.Dropout.forward = saved
        flag.restore()
    shares, other = group_shares(list(profile_rows(prof.events())))
    return shares, other, seconds


def window_figures(records: list[dict[str, float]], compiled: bool, warmup: Sequence[dict[str, float]] = ()) -> dict:
    """Tokens/s over the timed updates. Compiled, the updates that built a graph are left out of the rate, and the
    time beyond a steady update's (the median of the timed updates that built none) of every update that built one,
    warm-up included, is counted as compile time."""
    steady = [r for r in records if not r["graphs"]] or records
    seconds = sum(r["seconds"] for r in steady)
    src, tgt = sum(r["src_tokens"] for r in steady), sum(r["tgt_tokens"] for r in steady)
    figures = {
        "updates": len(steady),
        "seconds": round(seconds, 3),
        "src_tokens": src,
        "tgt_tokens": tgt,
        "src_tgt_tok_per_s": round((src + tgt) / seconds, 1),
        "s_per_update": round(seconds / len(steady), 4),
    }
    if compiled:
        median = statistics.median(r["seconds"] for r in steady)
        compiling = [r for r in [*warmup, *records] if r["graphs"]]
        figures["compile_updates"] = len(compiling)
        figures["window_compile_updates"] = sum(1 for r in records if r["graphs"])
        figures["compile_s"] = round(sum(max(r["seconds"] - median, 0.0) for r in compiling), 1)
    return figures


def measure(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from mtkit.model.onednn import cpu_matmul
    from mtkit.model.precision import native_bf16

    matmul = {"fp32": round(matmul_gflops("fp32", args.threads, args.matmul_seconds), 1)}
    if cpu_matmul() == "onednn":  # the library the update's float32 products run on
        matmul["fp32_onednn"] = round(matmul_gflops("fp32", args.threads, args.matmul_seconds, library="onednn"), 1)
    if native_bf16("cpu") or args.precision == "bf16":
        matmul["bf16"] = round(matmul_gflops("bf16", args.threads, args.matmul_seconds), 1)
    with tempfile.TemporaryDirectory(prefix="step-flops-") as tmp:
        start = time.perf_counter()
        run, train_data = build(args, Path(tmp) / "run")
        try:
            warm = timed_updates(run, train_data, args.warmup, 0)
            built_s = time.perf_counter() - start
            records = timed_updates(run, train_data, args.updates, args.warmup)
            result: dict[str, Any] = {
                "capability": torch.backends.cpu.get_cpu_capability(),
                "precision": run.cfg.precision,
                "threads": torch.get_num_threads(),
                "optimizer": "fused" if args.optimizer == "fused" else "foreach (mtkit)",
                "compile": bool(run.cfg.compile),
                "matmul_gflops": matmul,
                "build_and_warmup_s": round(built_s, 1),
                **window_figures(records, run.cfg.compile, warm),
            }
            if run.cfg.compile:
                result["graphs"] = compiled_graphs()
            if args.profile and not run.cfg.compile:  # compiled code has no per-op events to group
                shares, other, seconds = profiled_updates(run, train_data, args.profile, args.warmup + args.updates)
                result.update({"shares": shares, "other_top_us": other, "profiled_s_per_update": round(seconds, 4)})
        finally:
            run.metrics.close()
    return result


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="a preprocessed Multi30k en-de data directory")
    parser.add_argument("--precision", default="fp32", choices=("fp32", "bf16", "auto"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--optimizer", default="mtkit", choices=("mtkit", "fused"))
    parser.add_argument("--compile", action="store_true", help="train.compile = true")
    parser.add_argument("--warmup", type=int, default=10, help="untimed updates first")
    parser.add_argument("--updates", type=int, default=60, help="timed updates")
    parser.add_argument("--profile", type=int, default=5, help="profiled updates after the timed ones (0: none)")
    parser.add_argument("--matmul-seconds", type=float, default=3.0)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    result = measure(parse_args(argv))
    print("RESULT " + json.dumps(result), flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
