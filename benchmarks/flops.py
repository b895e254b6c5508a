"""Model FLOPs of a training update and the matmul peak they are set against (MFU): used by the GPU benchmark
(bench_gpu_check.py, bench_model.py). Imports torch and mtkit lazily; no scenario logic.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

RECIPE = Path(__file__).resolve().parents[1] / "recipes" / "multi30k-en-de" / "small.toml"


def matmul_gflops(dtype_name: str, threads: int, seconds: float, device: str = "cpu", library: str = "torch") -> float:
    """Sustained GFLOP/s of n x n matrix products (2 n^3 FLOPs each): n 2048 on CPU threads, 8192 on GPU; by
    torch.matmul (MKL for float32 on CPU), or with `library` "onednn" by oneDNN's op, as mtkit's training runs
    float32 products on CPU (mtkit.model.onednn)."""
    import torch

    torch.set_num_threads(threads)
    n = 8192 if device == "cuda" else 2048
    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16}[dtype_name]
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
    out = torch.empty(n, n, device=device, dtype=dtype)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def product() -> None:
        if library == "onednn":
            torch.ops.mkldnn._linear_pointwise(a, b.t(), None, "none", [], "")
        else:
            torch.matmul(a, b, out=out)

    for _ in range(2):  # warm-up: thread pool, oneDNN / cuBLAS kernel selection
        product()
    sync()
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        product()
        sync()
        count += 1
    return 2 * n**3 * count / (time.perf_counter() - start) / 1e9


@dataclass
class FlopModel:
    """Per-token training FLOPs of the model, split by the side whose tokens drive them."""

    per_src_token: float
    per_tgt_token: float
    matmul_weights: int  # weights that multiply activations (biases and norms left out), tied embedding once
    non_embedding_matmul_weights: int


def attention_keys(data_dir: Path) -> tuple[float, float, float]:
    """Token-weighted mean keys per query: encoder self, decoder self (causal), cross; from the train split.

    A sentence of L tokens costs L^2 key visits in self-attention, so per token the mean is sum L^2 / sum L.
    """
    import numpy as np

    from mtkit.corpus.binarized import ParallelData, read_manifest

    manifest = read_manifest(data_dir)
    data = ParallelData.open(data_dir, "train", manifest["source_lang"], manifest["target_lang"])
    src = data.src_lens.astype(np.float64) + 1  # + eos
    tgt = data.tgt_lens.astype(np.float64) + 1  # bos + tokens (decoder input)
    return (src**2).sum() / src.sum(), (tgt * (tgt + 1) / 2).sum() / tgt.sum(), (tgt * src).sum() / tgt.sum()


def flop_model(data_dir: Path, arch: str | None) -> FlopModel:
    """Model FLOPs per non-pad token for one training update (forward + backward = 3x forward).

    Forward, per token, 2 FLOPs per weight it meets; training triples it:
      src token: 6 * (L_enc * (4 D^2 + 2 D F)  +  L_dec * 2 D^2)         encoder layers + cross-attention K/V
      tgt token: 6 * (L_dec * (6 D^2 + 2 D F)  +  D V)                   decoder layers + output projection
    plus attention scores and weighted sums, 3 * 4 D * keys per token and layer (QK^T and AV, 2 D each):
      src: L_enc * keys_enc;  tgt: L_dec * (keys_causal + keys_cross).
    Padding, softmax, norms and embedding lookups are not counted (model FLOPs, as in MFU).
    """
    from mtkit.corpus.binarized import read_manifest
    from mtkit.recipe import resolve_recipe

    cfg = resolve_recipe(RECIPE, arch, [], vocab_size=read_manifest(data_dir)["vocab_size"]).model
    d, f, v = cfg.d_model, cfg.d_ff, cfg.vocab_size
    enc_layer, dec_layer, cross_kv = 4 * d * d + 2 * d * f, 6 * d * d + 2 * d * f, 2 * d * d
    keys_enc, keys_causal, keys_cross = attention_keys(data_dir)
    per_src = 6 * (cfg.encoder_layers * enc_layer + cfg.decoder_layers * cross_kv)
    per_src += 12 * d * cfg.encoder_layers * keys_enc
    per_tgt = 6 * (cfg.decoder_layers * dec_layer + d * v) + 12 * d * cfg.decoder_layers * (keys_causal + keys_cross)
    non_embedding = cfg.encoder_layers * enc_layer + cfg.decoder_layers * (dec_layer + cross_kv)
    return FlopModel(per_src, per_tgt, non_embedding + v * d, non_embedding)


def read_metrics(run_dir: Path) -> list[dict]:
    """The per-update training records of metrics.jsonl (validation and skip records left out)."""
    path = run_dir / "metrics.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in records if "loss" in r and "tgt_tokens" in r]


def measure_window(records: list[dict], first: int, last: int) -> dict:
    """Peers' Measure A: tokens of updates first..last over the time from update first-1's stamp to last's."""
    by_step = {r["step"]: r for r in records}
    missing = [s for s in (first - 1, last) if s not in by_step]
    if missing:
        raise SystemExit(f"metrics.jsonl lacks updates {missing}: was train.log_interval=1 applied?")
    window = [by_step[s] for s in range(first, last + 1) if s in by_step]
    seconds = by_step[last]["wall"] - by_step[first - 1]["wall"]
    src, tgt = sum(r["src_tokens"] for r in window), sum(r["tgt_tokens"] for r in window)
    return {
        "window": [first, last],
        "n": len(window),
        "seconds": round(seconds, 2),
        "src_tokens": src,
        "tgt_tokens": tgt,
        "src_tgt_tok_per_s": round((src + tgt) / seconds, 1),
        "tgt_tok_per_s": round(tgt / seconds, 1),
        "s_per_update": round(seconds / len(window), 3),
        "tgt_tok_per_update": round(tgt / len(window)),
    }
