"""Training speed on the peers' "multi30k-small" workload: `mtkit train` fp32 (the baseline) and bf16 (where the
kernels run it natively) in alternating rounds; source+target tokens/s over the updates after the first `skip`
(start-up and allocator warm-up), read from metrics.jsonl wall stamps as the peers' Measure A reads its logs. With
--peers, the peers' own Measure A (fairseq, OpenNMT-py: benchmarks/peers/, installed under $PEERS) runs in the same
rounds.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
from pathlib import Path

from flops import measure_window, read_metrics
from harness import ROOT, WORK, alternate, checked, figures, measure, medians, ratios, thread_env, write_results

from scenarios.workload import RECIPE, WORKLOAD, data, mtkit

PEER_SCRIPTS = ROOT / "benchmarks" / "peers"
PEERS = Path(os.environ.get("PEERS", Path.home() / ".cache" / "mtkit-peers"))
PEER_NAMES = ("fairseq", "onmt")


def peer_script(peer: str) -> Path:
    return PEER_SCRIPTS / f"bench_{peer}.sh"


def peer_missing(peer: str, peers: Path = PEERS) -> str | None:
    """None when the peer's install and prep stages have finished under `peers`, else one line saying how to run
    them (each stage writes its marker last, so a stage stopped half way counts as missing)."""
    if (peers / peer / ".installed").is_file() and (peers / "runs" / peer / ".prepared").is_file():
        return None
    script = peer_script(peer).relative_to(ROOT)
    how = f"run `make bench-peers-install` (or `bash {script} install prep`)"
    return f"{peer}: not installed and prepared under {peers}: {how}"


def mtkit_program(precision: str, updates: int, skip: int, matmul: str = "auto"):
    """`mtkit train` in `precision`, its float32 CPU products by `matmul` (train.cpu_matmul)."""

    def once(round_: int) -> dict[str, float]:
        run = WORK / f"train-{precision}-{matmul}"
        shutil.rmtree(run, ignore_errors=True)  # a leftover run would be resumed, not retrained
        cmd = mtkit(
            "train",
            str(data()),
            "--save-dir",
            str(run),
            "--config",
            str(RECIPE),
            "--max-steps",
            str(updates),
            "--set",
            f"train.precision='{precision}'",
            "--set",
            "train.log_interval=1",
            "--set",
            f"train.cpu_matmul='{matmul}'",
            "--set",
            "train.save_interval_minutes=0",
            *WORKLOAD,
        )
        m = checked(measure(cmd, WORK / "logs" / f"train-{precision}-{matmul}"), f"mtkit train ({precision}, {matmul})")
        window = measure_window(read_metrics(run), skip + 1, updates)
        loss = {r["step"]: r["loss"] for r in read_metrics(run)}[updates]
        return {**figures(m), **{k: window[k] for k in ("src_tgt_tok_per_s", "s_per_update")}, "loss_last": loss}

    return once


def peer_program(peer: str, updates: int, skip: int):
    """The peer's `speed` stage (its Measure A); its A.result line gives tokens/s over the same window."""

    def once(round_: int) -> dict[str, float]:
        env = thread_env(2, PEERS=str(PEERS), UPDATES=str(updates))
        m = checked(
            measure(["bash", str(peer_script(peer)), "speed"], WORK / "logs" / f"peer-{peer}", env=env),
            f"{peer} speed",
        )
        result = (PEERS / "runs" / peer / "A.result").read_text()
        speed = re.search(r"src\+tgt_tok/s=([\d.]+)", result)
        return {**figures(m), "src_tgt_tok_per_s": float(speed.group(1)) if speed else float("nan")}

    return once


def run(args: argparse.Namespace) -> None:
    # The peers' scripts time updates 51-300 whatever the size asked: with --peers mtkit does the same.
    updates, skip = (60, 10) if args.small and not args.peers else (300, 50)
    from mtkit.model.precision import native_bf16

    programs = {
        "mtkit fp32": mtkit_program("fp32", updates, skip),
        "mtkit fp32, MKL's products": mtkit_program("fp32", updates, skip, "mkl"),
    }
    if native_bf16("cpu"):  # emulated bf16 (an AVX2-only CPU, or the AVX2 kernels forced) takes 30 s an update
        programs["mtkit bf16"] = mtkit_program("bf16", updates, skip)
    else:
        print("mtkit bf16: left out, this CPU's kernels have no native bf16 (mtkit.model.precision)", file=sys.stderr)
    if args.peers:
        for peer in PEER_NAMES:
            missing = peer_missing(peer)
            if missing:
                print(missing, file=sys.stderr)
            else:
                programs[peer] = peer_program(peer, updates, skip)
    results = alternate(programs, args.rounds)
    rel = ratios(results)
    rows = [
        {
            "program": name,
            "updates": f"{skip + 1}-{updates}",
            **medians(r),
            "tok/s vs mtkit fp32": rel[name].get("src_tgt_tok_per_s"),
            "RSS vs mtkit fp32": rel[name].get("peak_rss_mib"),
        }
        for name, r in results.items()
    ]
    write_results("train", {"rounds": results}, rows)
