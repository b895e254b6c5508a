"""`make bench`: run the mtkit benchmarks in sequence, print one table, write bench-out/results.json.

Each benchmark is its own script printing JSON (`--json`); this one only runs them and summarizes.
`--peers-ratios` instead compares bench-out/peers/*.json (written by peers.sh) with the peers' *.result files.
Usage: python benchmarks/run.py [--quick] [--only preprocess,pipeline,model,train,translate]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_train import BENCH_OUT, PEERS, ROOT, prepare_data  # noqa: E402  (sibling script)

HERE = Path(__file__).resolve().parent
DATA = BENCH_OUT / "data"
# name -> (script, arguments for `make bench`, arguments for --quick); run in this order.
BENCHES: dict[str, tuple[str, list[str], list[str]]] = {
    "preprocess": ("bench_preprocess.py", ["--pairs", "400000", "--sizes", "2"],
                   ["--pairs", "20000", "--sizes", "1", "--workers", "1"]),
    "pipeline": ("bench_pipeline.py", ["--data", str(DATA)],
                 ["--data", str(DATA), "--epochs", "1", "--sampler-sentences", "100000"]),
    "model": ("bench_model.py", [], ["--quick"]),
    "train": ("bench_train.py", ["--updates", "300"], ["--updates", "12", "--precision", "fp32,bf16", "--matmul-seconds", "0.5"]),
    "translate": ("bench_translate.py", ["--baseline-lines", "250", "--identity-lines", "250"],
                  ["--lines", "24", "--train-steps", "10", "--dtype", "fp32"]),
}


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    import torch

    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout if os.path.exists("/usr/bin/lscpu") else ""
    model = re.search(r"Model name:\s*(.+)", lscpu)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    return {
        "cpu": model.group(1).strip() if model else platform.processor(), "cores": os.cpu_count(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS", "unset"), "torch": torch.__version__,
        "python": platform.python_version(), "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "commit": commit,
    }


def run_bench(name: str, quick: bool) -> dict[str, Any]:
    """One benchmark script with --json; its progress goes to our stderr, its JSON is returned."""
    script, full, small = BENCHES[name]
    if not (HERE / script).is_file():
        return {"error": f"{script} not found"}
    cmd = [sys.executable, str(HERE / script), "--json"] + (small if quick else full)
    print(f"== {name}: {' '.join(cmd[1:])}", file=sys.stderr)
    start = time.monotonic()
    done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    seconds = round(time.monotonic() - start, 1)
    if done.returncode != 0:
        return {"error": f"exit code {done.returncode}", "seconds": seconds}
    try:
        return {"result": json.loads(done.stdout), "seconds": seconds}
    except json.JSONDecodeError:
        return {"error": "output is not JSON", "stdout_tail": done.stdout[-2000:], "seconds": seconds}


def rows_preprocess(r: dict) -> list[tuple[str, str]]:
    return [(f"{x['pairs']} pairs, {x['workers']} worker(s)",
             f"{x['pairs_per_s_per_worker']} pairs/s/worker, peak RSS {x.get('peak_rss_tree_mb', '?')} MB") for x in r["runs"]]


def rows_pipeline(r: dict) -> list[tuple[str, str]]:
    pipe, sampler = r["pipeline"], r["sampler"]
    return [("collate (train, 4096 tokens)", f"{pipe['ms_per_batch']} ms/batch, {pipe['tgt_tokens_per_s']} tgt tok/s"),
            ("padding efficiency", str(pipe["padding_efficiency"])),
            (f"make_batches, {sampler['sentences']} lengths", f"{sampler['make_batches_seconds']} s")]


def rows_train(r: dict) -> list[tuple[str, str]]:
    rows = []
    for x in r["runs"]:
        first, last = x["window"]
        rows.append((f"{x['precision']}, updates {first}-{last}",
                     f"{x['src_tgt_tok_per_s']:.0f} src+tgt tok/s, {x['tgt_tok_per_s']:.0f} tgt tok/s, "
                     f"{x['s_per_update']} s/update, peak RSS {x['peak_rss_mib']} MiB"))
        rows.append((f"{x['precision']} model FLOPs", f"{x['achieved_gflops']} GFLOP/s = {x['pct_of_peak']}% of "
                     f"{x['precision']} matmul peak; loss {x['loss_at'] or x['final_loss']}"))
    peaks = r["matmul_peak_gflops"]
    rows.append(("matmul peak (2048^3)", f"fp32 {peaks['fp32']} / bf16 {peaks['bf16']} GFLOP/s"))
    return rows


def rows_translate(r: dict) -> list[tuple[str, str]]:
    rows = []
    for x in r["runs"]:
        kv, same = x["kv_cache"], x["batch_identity"]["differing_from_alone"]
        rows.append((f"{x['dtype']} beam 4, {x['sentences']} sents",
                     f"{x['sent_per_s']} sent/s, {x['tgt_tok_per_s']} tok/s, whole process {x['whole_process_wall_s']} s, "
                     f"RSS {x['peak_rss_mib']} MiB, BLEU {x['bleu']}"))
        rows.append((f"{x['dtype']} KV cache vs none", f"{kv['speedup']}x ({kv['lines']} lines); "
                     f"batch-size changes alter {same} lines"))
    return rows


def rows_generic(r: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Scalar leaves of any JSON result (for benchmarks without a summary of their own), at most 12."""
    if isinstance(r, dict):
        items = r.items()
    elif isinstance(r, list):
        items = ((str(i), v) for i, v in enumerate(r))
    else:
        return [(prefix, str(r))]
    rows = [row for key, value in items for row in rows_generic(value, f"{prefix}.{key}" if prefix else str(key))]
    return rows[:12]


SUMMARIES = {"preprocess": rows_preprocess, "pipeline": rows_pipeline, "train": rows_train, "translate": rows_translate}


def print_table(title: str, rows: list[tuple[str, str, str]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, show_lines=False)
    for column in ("benchmark", "measure", "value"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*row)
    Console().print(table)


def summary_rows(results: dict[str, dict]) -> list[tuple[str, str, str]]:
    rows = []
    for name, outcome in results.items():
        if "error" in outcome:
            rows.append((name, "error", outcome["error"]))
            continue
        try:
            found = SUMMARIES.get(name, rows_generic)(outcome["result"])
        except (KeyError, TypeError) as exc:  # a script changed its JSON: still show something
            found = [(f"(summary failed: {exc!r})", "")] + rows_generic(outcome["result"])
        rows += [(name if i == 0 else "", measure, value) for i, (measure, value) in enumerate(found)]
    return rows


# ---- peers: parse the *.result files of /work/shared/bench/peers/*.sh (formats in its README) ----

KEY_VALUE = re.compile(r"([A-Za-z][\w+/]*)=([-\d.,]+)")
FAIRSEQ_TRANSLATED = re.compile(r"Translated ([\d,]+) sentences \(([\d,]+) tokens\) in ([\d.]+)s \(([\d.]+) sentences/s")


def number(text: str) -> float | str:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return text


def parse_key_values(text: str) -> dict[str, float | str]:
    """Every `key=value` of benchutil's lines (speed, rss, score, ct2); the first occurrence wins."""
    found: dict[str, float | str] = {}
    for key, value in KEY_VALUE.findall(text):
        found.setdefault(key, number(value.rstrip(",.") or value))
    return found


def parse_fairseq_translate(text: str) -> dict[str, float | str]:
    """fairseq C.result: the `Translated N sentences (T tokens) in Xs (S sentences/s, ...)` line + rss line."""
    found = parse_key_values(text)
    match = FAIRSEQ_TRANSLATED.search(text)
    if match:
        found.update({"sents": number(match.group(1)), "gen_tokens_incl_eos": number(match.group(2)),
                      "translate_s": float(match.group(3)), "sent/s": float(match.group(4))})
    return found


def parse_onmt_translate(text: str) -> dict[str, float | str]:
    """OpenNMT-py C.result: `Total translation time (s): X` and `NB SENTENCES: N` (+ rss line)."""
    found = parse_key_values(text)
    total, sents = re.search(r"Total translation time \(s\): ([\d.]+)", text), re.search(r"NB SENTENCES: (\d+)", text)
    if total:
        found["translate_s"] = float(total.group(1))
        found["sent/s"] = round((float(sents.group(1)) if sents else 1000.0) / found["translate_s"], 1)
    return found


def parse_ct2_results(text: str) -> dict[str, dict[str, float | str]]:
    """ct2 C.result: `== SOURCE COMPUTE_TYPE` sections -> {"fairseq float32": {"sent/s": ..., ...}}."""
    sections = re.split(r"^== (.+)$", text, flags=re.MULTILINE)
    return {name.strip(): parse_key_values(body) for name, body in zip(sections[1::2], sections[2::2])}
