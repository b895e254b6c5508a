"""`make bench`: run the mtkit benchmarks in sequence, print one table, write bench-out/results.json.

Each benchmark is its own script printing JSON (`--json`); this one only runs them and summarizes.
`--peers-ratios` instead compares bench-out/peers/*.json (written by peers.sh) with the peers' *.result files.
Usage: python benchmarks/run.py [--quick] [--only preprocess,pipeline,model,train,translate,ct2]
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
    "model": ("bench_model.py", [], ["--sentences", "16", "--steps", "1", "--warmup", "0"]),
    "train": ("bench_train.py", ["--updates", "300"],
              ["--updates", "12", "--precision", "fp32,bf16", "--matmul-seconds", "0.5"]),
    "translate": ("bench_translate.py", ["--baseline-lines", "250", "--identity-lines", "250"],
                  ["--lines", "24", "--train-steps", "10", "--dtype", "fp32"]),
    "ct2": ("bench_ct2_same_model.py", ["--rounds", "3"], ["--lines", "24", "--train-steps", "10", "--rounds", "1"]),
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


def rows_model(r: dict) -> list[tuple[str, str]]:
    rows = []
    for x in r["results"]:
        mfu = f", MFU {x['mfu']:.1%}" if x.get("mfu") is not None else ""
        rows.append((f"{x['model']} {x['dtype']} fwd+bwd ({r['preset']}, {r['device']})",
                     f"{x['step_s'] * 1e3:.0f} ms/step, {x['tgt_tokens_per_s']:.0f} tgt tok/s, "
                     f"{x['ratio_to_baseline']:.2f}x {r['baseline']}{mfu}"))
    return rows


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


def rows_ct2(r: dict) -> list[tuple[str, str]]:
    """Same-model pairs (mtkit / CTranslate2, mean of the rounds) per setting."""
    rows = []
    for setting, result in r["settings"].items():
        for name, pair in result["pairs"].items():
            m = pair["mean"]
            rows.append((f"{setting}: {name}", f"{m['sent_per_s']}x sent/s, {m['tgt_tok_per_s']}x tok/s, "
                         f"{m['whole_process_s']}x whole process, {m['peak_rss_mib']}x RSS, "
                         f"{pair['identical_lines']}/{pair['lines']} lines identical"))
    return rows


SUMMARIES = {"preprocess": rows_preprocess, "pipeline": rows_pipeline, "model": rows_model, "train": rows_train,
             "translate": rows_translate, "ct2": rows_ct2}


TABLE_COLUMNS = ("benchmark", "measure", "value")


def print_table(title: str, rows: list[tuple[str, str, str]], columns: tuple[str, ...] = TABLE_COLUMNS) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, show_lines=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*row)
    Console(width=None if sys.stdout.isatty() else 140).print(table)  # a pipe or file gets full rows


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


def read_peer_results(peers: Path) -> dict[str, dict[str, float | str]]:
    """The peers' results under $PEERS/runs: "fairseq A", "fairseq C", "onmt A", "onmt C", "ct2 fairseq float32", ..."""
    runs = peers / "runs"

    def read(path: Path) -> str:
        return path.read_text(errors="replace") if path.is_file() else ""

    found: dict[str, dict[str, float | str]] = {}
    for peer, parse in (("fairseq", parse_fairseq_translate), ("onmt", parse_onmt_translate)):
        if speed := read(runs / peer / "A.result"):
            found[f"{peer} A"] = parse_key_values(speed)
        if translate := read(runs / peer / "C.result"):
            found[f"{peer} C"] = parse_key_values(read(runs / peer / "B.score")) | parse(translate)
    for name, values in parse_ct2_results(read(runs / "ct2" / "C.result")).items():
        found[f"ct2 {name}"] = values
    return found


def ratio_row(comparison: str, mtkit: float, peer: float) -> dict[str, Any]:
    """mtkit / peer: above 1 means mtkit is faster."""
    return {"comparison": comparison, "mtkit": mtkit, "peer": peer, "ratio": round(mtkit / peer, 2) if peer else None}


TRANSLATE_PEERS = (("fairseq C", "fairseq-generate"), ("onmt C", "onmt_translate"),
                   ("ct2 fairseq float32", "CTranslate2 fp32"), ("ct2 fairseq int8", "CTranslate2 int8"))


def peer_ratios(train: dict, translate: dict, peers: dict[str, dict]) -> list[dict[str, Any]]:
    """Training tok/s against fairseq (and OpenNMT-py) fp32; translation sent/s against each decoder."""
    rows = []
    for run in train.get("runs", []):
        for peer in ("fairseq", "onmt"):
            speed = peers.get(f"{peer} A", {})
            if isinstance(speed.get("src+tgt_tok/s"), float):
                rows.append(ratio_row(f"train {run['precision']} vs {peer} fp32: src+tgt tok/s",
                                      run["src_tgt_tok_per_s"], speed["src+tgt_tok/s"]))
    for run in translate.get("runs", []):
        for key, label in TRANSLATE_PEERS:
            peer = peers.get(key, {})
            if not isinstance(peer.get("sent/s"), float):
                continue
            rows.append(ratio_row(f"translate {run['dtype']} vs {label}: sent/s (after load)",
                                  run["sent_per_s"], peer["sent/s"]))
            if isinstance(peer.get("wall_s"), float):
                sents = peer.get("sents", 1000.0)
                mtkit_rate = round(run["sentences"] / run["whole_process_wall_s"], 1)
                rows.append(ratio_row(f"translate {run['dtype']} vs {label}: sent/s (whole process)",
                                      mtkit_rate, round(sents / peer["wall_s"], 1)))
            if isinstance(peer.get("BLEU"), float):
                rows.append({"comparison": f"BLEU {run['dtype']} vs {label} (not a ratio)", "mtkit": run["bleu"],
                             "peer": peer["BLEU"], "ratio": None})
    return rows


def compare_with_peers(peers_dir: Path) -> None:
    """Print and save the mtkit/peer ratios from bench-out/peers/{train,translate}.json (peers.sh writes them)."""
    def load(name: str) -> dict:
        path = BENCH_OUT / "peers" / f"{name}.json"
        return json.loads(path.read_text()) if path.is_file() else {}

    peers = read_peer_results(peers_dir)
    rows = peer_ratios(load("train"), load("translate"), peers)
    (BENCH_OUT / "peers").mkdir(parents=True, exist_ok=True)
    (BENCH_OUT / "peers" / "ratios.json").write_text(json.dumps({"peers": peers, "ratios": rows}, indent=2) + "\n")
    if not peers:
        print(f"no peer results under {peers_dir}/runs (run the peer scripts first)", file=sys.stderr)
    rows_text = [(r["comparison"], f"{r['mtkit']} vs {r['peer']}", "-" if r["ratio"] is None else f"{r['ratio']}x")
                 for r in rows]
    print_table(f"mtkit / peers ({peers_dir})", rows_text, ("comparison", "mtkit vs peer", "mtkit / peer"))


# Sample lines of each *.result format, from the peers' RESULTS.md (checked by --check-peer-parsing).
SAMPLE_RESULTS = {
    "fairseq/A.result": "updates=51-300 n=250 seconds=377.36 src_tok=829841 tgt_tok=857788 src+tgt_tok/s=4472 "
                        "tgt_tok/s=2273 s/update=1.509 tgt_tok/update=3431\npeak_rss_mib=1629 wall_s=461.4 cpu_s=900.0\n",
    "fairseq/C.result": "Translated 1,000 sentences (14,164 tokens) in 18.3s (54.78 sentences/s, 775.94 tokens/s)\n"
                        "peak_rss_mib=616 wall_s=24.5 cpu_s=41.9 avg_cores=1.71\n",
    "fairseq/B.score": "BLEU=24.33 chrF=46.59 hyp_spm_tokens=13164 (no EOS) lines=1000\n",
    "onmt/C.result": "PRED SCORE: -1.2610, PRED PPL: 3.53 NB SENTENCES: 1000\nTotal translation time (s): 14.3\n"
                     "peak_rss_mib=560 wall_s=20.1 cpu_s=33.8 avg_cores=1.68\n",
    "ct2/C.result": "== fairseq float32\nctranslate2 4.8.5 compute_type=float32 beam=4 max_batch_size=64 intra_threads=2\n"
                    "import_s=0.10 load_s=0.02 translate_s=8.43 sents=1000 sent/s=118.7 gen_tokens=13500 (no EOS) tok/s=1602\n"
                    "peak_rss_mib=168 wall_s=8.6 cpu_s=16.9 avg_cores=1.96\nBLEU=23.84 chrF=46.39\n== fairseq int8\n"
                    "import_s=0.05 load_s=0.03 translate_s=10.47 sents=1000 sent/s=95.5 gen_tokens=13495 (no EOS)\n",
}


def check_peer_parsing() -> None:
    """Parse SAMPLE_RESULTS laid out as $PEERS/runs and compare with the numbers RESULTS.md states."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for name, text in SAMPLE_RESULTS.items():
            (Path(tmp) / "runs" / name).parent.mkdir(parents=True, exist_ok=True)
            (Path(tmp) / "runs" / name).write_text(text)
        peers = read_peer_results(Path(tmp))
    expected = {("fairseq A", "src+tgt_tok/s"): 4472.0, ("fairseq A", "peak_rss_mib"): 1629.0,
                ("fairseq C", "sent/s"): 54.78, ("fairseq C", "wall_s"): 24.5, ("fairseq C", "BLEU"): 24.33,
                ("onmt C", "sent/s"): 69.9, ("ct2 fairseq float32", "sent/s"): 118.7,
                ("ct2 fairseq float32", "BLEU"): 23.84, ("ct2 fairseq int8", "sent/s"): 95.5}
    wrong = {key: peers.get(key[0], {}).get(key[1]) for key, value in expected.items()
             if peers.get(key[0], {}).get(key[1]) != value}
    train = {"runs": [{"precision": "bf16", "src_tgt_tok_per_s": 8944.0}]}
    translate = {"runs": [{"dtype": "fp32", "sent_per_s": 109.56, "sentences": 1000, "whole_process_wall_s": 20.0,
                           "bleu": 24.0}]}
    ratios = {r["comparison"]: r["ratio"] for r in peer_ratios(train, translate, peers)}
    for comparison, value in (("train bf16 vs fairseq fp32: src+tgt tok/s", 2.0),
                              ("translate fp32 vs fairseq-generate: sent/s (after load)", 2.0)):
        if ratios.get(comparison) != value:
            wrong[comparison] = ratios.get(comparison)
    if wrong:
        raise SystemExit(f"peer parsing disagrees with RESULTS.md: {wrong}")
    print(f"peer parsing OK: {len(expected)} values and {len(ratios)} ratios from the RESULTS.md sample lines")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run of the harness (minutes)")
    parser.add_argument("--only", help=f"comma-separated subset of: {', '.join(BENCHES)}")
    parser.add_argument("--peers-ratios", action="store_true", help="only compare bench-out/peers/*.json with $PEERS")
    parser.add_argument("--peers", type=Path, default=PEERS, help="peer runs root (default $PEERS or ~/.cache/mtkit-peers)")
    parser.add_argument("--check-peer-parsing", action="store_true", help="parse RESULTS.md sample lines and exit")
    args = parser.parse_args()
    if args.check_peer_parsing:
        check_peer_parsing()
        return
    if args.peers_ratios:
        compare_with_peers(args.peers)
        return
    names = [n.strip() for n in args.only.split(",")] if args.only else list(BENCHES)
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; valid: {', '.join(BENCHES)}")
    info = machine()
    print(f"machine: {info['cpu']}, {info['cores']} cores, OMP_NUM_THREADS={info['omp_num_threads']}, torch {info['torch']}, "
          f"python {info['python']}, {info['date']}, commit {info['commit']}")
    if "pipeline" in names:
        prepare_data(DATA)
    results = {name: run_bench(name, args.quick) for name in names}
    BENCH_OUT.mkdir(parents=True, exist_ok=True)
    out = BENCH_OUT / ("results-quick.json" if args.quick else "results.json")
    out.write_text(json.dumps({"machine": info, "quick": args.quick, "benchmarks": results}, indent=2) + "\n")
    title = "mtkit benchmarks" + (" (--quick: sizes too small to mean anything)" if args.quick else "")
    print_table(title, summary_rows(results))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
