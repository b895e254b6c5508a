"""Translation speed on the "multi30k-small" workload (the peers' Measure C) and the key/value cache's gain.

Per dtype: `mtkit translate RUN --beam 4` on test_2016_flickr under /usr/bin/time -v (sentences/s, target
tokens/s, whole-process wall, peak RSS, BLEU); in-process, the same model with and without the KV cache
(the baseline re-runs model.decode on the whole prefix every step); and whether outputs change with the
batch size (--batch-tokens 1 sentence / 500 / 8000). Usage: python benchmarks/bench_translate.py [--json]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_train import (  # noqa: E402  (sibling script, not a package)
    BENCH_OUT, RECIPE, check_run, finite, multi30k_dir, mtkit_command, prepare_data, run_timed, thread_env,
)

IDENTITY_BATCH_TOKENS = (1, 500, 8000)  # 1: every sentence alone (a batch never splits a sentence)


@dataclass
class NoCacheState:
    """Everything the cache-free decoder keeps: the encoder output and the tokens fed so far."""

    memory: Any  # [N, S, D]
    src_pad: Any  # [N, S] bool
    prefix: Any  # [N, t]


class NoCacheDecoder:
    """The search Decoder contract without a key/value cache: each step decodes the whole prefix.

    The naive baseline: self-attention keys/values and the cross-attention projections of the memory are
    recomputed for every position at every step; only the last position's output is used.
    """

    def __init__(self, model: Any) -> None:
        self.model = model

    def start(self, src: Any) -> NoCacheState:
        memory, src_pad = self.model.encode(src)
        return NoCacheState(memory, src_pad, src.new_zeros((src.size(0), 0)))

    def step(self, tokens: Any, state: NoCacheState) -> Any:
        import torch
        import torch.nn.functional as F

        state.prefix = torch.cat([state.prefix, tokens[:, None]], dim=1)  # [N, t+1]
        hidden = self.model.decode(state.prefix, state.memory, state.src_pad)[:, -1]  # [N, D]
        return F.log_softmax(self.model.project(hidden).float(), dim=-1)  # [N, V]

    def reorder(self, state: NoCacheState, order: Any) -> NoCacheState:
        return NoCacheState(*(t.index_select(0, order) for t in (state.memory, state.src_pad, state.prefix)))


def read_test_set(limit: int | None) -> tuple[Path, list[str], list[str]]:
    """test_2016_flickr source file (first `limit` lines) under bench-out, its lines and the references."""
    from mtkit.files import read_lines

    source, reference = (list(read_lines(multi30k_dir() / f"test_2016_flickr.{lang}.gz"))[:limit] for lang in ("en", "de"))
    path = BENCH_OUT / f"test-{len(source)}.en"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(source) + "\n", encoding="utf-8")
    return path, source, reference


def has_model(run_dir: Path) -> bool:
    return (run_dir / "average.pt").is_file() or any((run_dir / "checkpoints").glob("step_*.pt"))


def ensure_model(model: Path | None, train_steps: int, train_minutes: float, threads: int, device: str) -> Path:
    """The run to translate with: --model, else bench-out/train-bf16 (bench_train), else train one now on `device`."""
    if model is not None:
        return model
    if not train_minutes and has_model(BENCH_OUT / "train-bf16"):
        return BENCH_OUT / "train-bf16"
    limit = ["--max-time", str(train_minutes)] if train_minutes else ["--max-steps", str(train_steps)]
    name = f"{train_minutes:g}min" if train_minutes else f"{train_steps}steps"
    run_dir = BENCH_OUT / f"translate-model-{name}"
    if has_model(run_dir):
        return run_dir
    if run_dir.exists():
        shutil.rmtree(run_dir)  # an unfinished run: start over
    cmd = mtkit_command() + ["train", str(prepare_data()), "--save-dir", str(run_dir), "--config", str(RECIPE),
                             "--set", f"train.device={device}"] + limit
    print(f"training a model to translate with ({name}) -> {run_dir}", file=sys.stderr)
    check_run(run_timed(cmd, thread_env(threads), BENCH_OUT / f"translate-model-{name}.log"), "mtkit train")
    return run_dir


def cli_translate(run_dir: Path, source: Path, dtype: str, device: str, batch_tokens: int | None, threads: int) -> dict:
    """Whole-process `mtkit translate` run; mtkit's own timing (after model load) is read from its log line."""
    hyp = BENCH_OUT / f"translate-{device}-{dtype}.hyp"
    cmd = mtkit_command() + ["translate", str(run_dir), "--beam", "4", "--input", str(source), "--output", str(hyp),
                             "--dtype", dtype, "--device", device]
    cmd += ["--batch-tokens", str(batch_tokens)] if batch_tokens else []
    run = run_timed(cmd, thread_env(threads), BENCH_OUT / f"translate-{device}-{dtype}.log")
    check_run(run, f"mtkit translate ({dtype})")
    found = re.search(r"translated (\d+) lines in ([\d.]+)s", run.stderr)
    seconds = float(found.group(2)) if found else run.wall_s
    lines = hyp.read_text(encoding="utf-8").split("\n")[:-1]
    return {"seconds": seconds, "wall_s": round(run.wall_s, 2), "load_s": round(run.wall_s - seconds, 2),
            "peak_rss_mib": finite(run.peak_rss_mib, 0), "cpu_s": finite(run.cpu_s, 1), "hyps": lines, "hyp_path": str(hyp)}


def timed_translate(translator: Any, lines: list[str]) -> tuple[float, list[str], int]:
    """Seconds, outputs and generated tokens (eos excluded) of one in-process translation."""
    start = time.perf_counter()
    results = translator.translate_hypotheses(lines)
    seconds = time.perf_counter() - start
    hyps = [r[0].tokens if r else [] for r in results]
    return seconds, translator.tokenizer.decode(hyps), sum(len(h) for h in hyps)


def differing(a: list[str], b: list[str]) -> int:
    return sum(x != y for x, y in zip(a, b, strict=True))


def cache_versus_none(translator: Any, lines: list[str]) -> dict:
    """Same model, same batches, same search: the KV-cached decoder against the cache-free baseline."""
    translator.translate(lines[:8])  # warm-up: kernel selection, allocator
    cached_s, cached, tokens = timed_translate(translator, lines)
    baseline = replace(translator, decoder=NoCacheDecoder(translator.decoder.models[0]))
    plain_s, plain, _ = timed_translate(baseline, lines)
    return {
        "lines": len(lines), "cached_s": round(cached_s, 2), "no_cache_s": round(plain_s, 2),
        "cached_sent_per_s": round(len(lines) / cached_s, 1), "no_cache_sent_per_s": round(len(lines) / plain_s, 1),
        "cached_tgt_tok_per_s": round(tokens / cached_s), "speedup": round(plain_s / cached_s, 2),
        "lines_differing": differing(cached, plain),
    }


def batch_identity(translator: Any, lines: list[str]) -> dict:
    """Lines whose output differs from translating every sentence alone, per --batch-tokens."""
    outputs = {bt: replace(translator, cfg=replace(translator.cfg, batch_tokens=bt)).translate(lines)
               for bt in IDENTITY_BATCH_TOKENS}
    alone = outputs[IDENTITY_BATCH_TOKENS[0]]
    return {"lines": len(lines), "differing_from_alone": {str(bt): differing(alone, out) for bt, out in outputs.items()}}


def bench_dtype(run_dir: Path, dtype: str, args: argparse.Namespace, source: Path, lines: list[str], refs: list[str]) -> dict:
    import torch

    from mtkit.score import score
    from mtkit.translate import Translator

    cli = cli_translate(run_dir, source, dtype, args.device, args.batch_tokens, args.threads)
    torch.set_num_threads(args.threads)
    options = {"beam": 4} | ({"batch_tokens": args.batch_tokens} if args.batch_tokens else {})
    translator = Translator.load(run_dir, device=args.device, dtype=dtype, **options)
    tokens = sum(len(t) for t in translator.tokenizer.encode(cli["hyps"]))  # spm pieces of the output, no eos
    quality = score(cli["hyps"], [refs])
    result = {
        "dtype": dtype, "device": args.device, "batch_tokens": translator.cfg.batch_tokens, "sentences": len(lines),
        "sent_per_s": round(len(lines) / cli["seconds"], 1), "tgt_tok_per_s": round(tokens / cli["seconds"]),
        "translate_s": round(cli["seconds"], 2), "whole_process_wall_s": cli["wall_s"], "load_s": cli["load_s"],
        "peak_rss_mib": cli["peak_rss_mib"], "cpu_s": cli["cpu_s"], "hyp_tokens": tokens,
        "hyp_tokens_per_sentence": round(tokens / max(len(lines), 1), 2), "bleu": quality.bleu, "chrf": quality.chrf,
        "hyp_path": cli["hyp_path"],
    }
    subset = lines[: args.baseline_lines] if args.baseline_lines else lines
    result["kv_cache"] = cache_versus_none(translator, subset)
    identity = lines[: args.identity_lines] if args.identity_lines else lines
    result["batch_identity"] = batch_identity(translator, identity)
    return result


def print_text(report: dict) -> None:
    print(f"model: {report['model']}")
    for r in report["runs"]:
        kv, same = r["kv_cache"], r["batch_identity"]
        print(f"== mtkit translate {r['dtype']} on {r['device']}, beam 4, batch_tokens {r['batch_tokens']}")
        print(f"sents={r['sentences']} translate_s={r['translate_s']} sent/s={r['sent_per_s']} tok/s={r['tgt_tok_per_s']} "
              f"(no EOS) load_s={r['load_s']}")
        print(f"peak_rss_mib={r['peak_rss_mib']} wall_s={r['whole_process_wall_s']} cpu_s={r['cpu_s']}")
        print(f"BLEU={r['bleu']} chrF={r['chrf']} hyp_tokens/sentence={r['hyp_tokens_per_sentence']}")
        print(f"kv cache: {kv['cached_sent_per_s']} vs {kv['no_cache_sent_per_s']} sent/s without "
              f"({kv['speedup']}x, {kv['lines']} lines, {kv['lines_differing']} outputs differ)")
        print(f"batch identity over {same['lines']} lines, lines differing from 1-sentence batches: "
              f"{same['differing_from_alone']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="RUN_DIR or checkpoint (default: bench-out/train-bf16, else train)")
    parser.add_argument("--train-steps", type=int, default=100, help="updates when a model must be trained")
    parser.add_argument("--train-minutes", type=float, default=0.0, help="train this long instead (peers' Measure B)")
    parser.add_argument("--dtype", default="fp32,bf16", help="comma-separated: fp32, bf16 (fp16 on cuda)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch-tokens", type=int, help="source tokens per batch (default: the run's recipe)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--lines", type=int, help="translate only the first N test lines (default all 1000)")
    parser.add_argument("--baseline-lines", type=int, help="lines for the cache/no-cache comparison (default all)")
    parser.add_argument("--identity-lines", type=int, help="lines for the batch-size identity check (default all)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    run_dir = ensure_model(args.model, args.train_steps, args.train_minutes, args.threads, args.device)
    source, lines, refs = read_test_set(args.lines)
    runs = [bench_dtype(run_dir, d.strip(), args, source, lines, refs) for d in args.dtype.split(",") if d.strip()]
    report = {"workload": "multi30k-small", "model": str(run_dir), "threads": args.threads, "beam": 4, "runs": runs}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_text(report)


if __name__ == "__main__":
    main()
