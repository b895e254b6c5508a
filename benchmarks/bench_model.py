"""Forward+backward throughput of mtkit's Transformer against torch.nn.Transformer of the same sizes.

CPU (default): the `small` preset in float32 and bf16 autocast, threads from OMP_NUM_THREADS (default 2).
CUDA (`--device cuda --preset base|big`): bf16 autocast, with achieved TFLOP/s and MFU against a bf16
matmul peak measured in the same run. Throughput counts target tokens, like fairseq's wps.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from flops import matmul_gflops
from torch import Tensor, nn

from mtkit.model.layers import sinusoidal_positions
from mtkit.model.transformer import ModelConfig, Transformer


class TorchTransformer(nn.Module):
    """The baseline: nn.Transformer with the same embeddings, positions and tied output projection."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model, padding_idx=cfg.pad_id)
        self.register_buffer("positions", sinusoidal_positions(cfg.max_positions, cfg.d_model), persistent=False)
        self.dropout = nn.Dropout(cfg.dropout)
        self.transformer = nn.Transformer(
            d_model=cfg.d_model,
            nhead=cfg.n_heads,
            num_encoder_layers=cfg.encoder_layers,
            num_decoder_layers=cfg.decoder_layers,
            dim_feedforward=cfg.d_ff,
            dropout=cfg.dropout,
            batch_first=True,
            norm_first=cfg.norm == "pre",
        )

    def _embed(self, tokens: Tensor) -> Tensor:
        scaled = self.embed(tokens) * math.sqrt(self.cfg.d_model)  # [B, L, D]
        return self.dropout(scaled + self.positions[: tokens.shape[1]])

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """src [B, S], tgt_in [B, T] -> logits [B, T, V]."""
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.shape[1], device=tgt_in.device)
        src_pad = src == self.cfg.pad_id
        hidden = self.transformer(
            self._embed(src),
            self._embed(tgt_in),
            tgt_mask=causal,
            src_key_padding_mask=src_pad,
            memory_key_padding_mask=src_pad,
            tgt_is_causal=True,
        )
        return hidden @ self.embed.weight.T


def training_flops(cfg: ModelConfig, sentences: int, src_len: int, tgt_len: int) -> float:
    """Matmul FLOPs of one forward+backward (3x forward); causal self-attention counts half."""
    d_model, d_ff = cfg.d_model, cfg.d_ff
    src_tokens, tgt_tokens = sentences * src_len, sentences * tgt_len
    encoder_layer = 2 * src_tokens * (4 * d_model**2 + 2 * d_model * d_ff) + 4 * src_tokens * src_len * d_model
    decoder_layer = (
        2 * tgt_tokens * (8 * d_model**2 + 2 * d_model * d_ff)
        + 2 * tgt_tokens * tgt_len * d_model  # causal self-attention: half of 4 T^2 D
        + 4 * tgt_tokens * src_len * d_model  # cross-attention
    )
    output = 2 * tgt_tokens * d_model * cfg.vocab_size
    forward = cfg.encoder_layers * encoder_layer + cfg.decoder_layers * decoder_layer + output
    return 3.0 * forward


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_training(
    model: nn.Module, batch: tuple[Tensor, ...], dtype: torch.dtype | None, steps: int, warmup: int
) -> float:
    """Median seconds of a forward+backward step, after `warmup` untimed steps (the median resists
    other processes on a shared machine)."""
    src, tgt_in, tgt_out = batch
    device = src.device

    def step() -> None:
        model.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            logits = model(src, tgt_in)
        loss = F.cross_entropy(logits.float().flatten(0, 1), tgt_out.flatten(), ignore_index=0)
        loss.backward()

    for _ in range(warmup):
        step()
    seconds = []
    for _ in range(steps):
        synchronize(device)
        start = time.perf_counter()
        step()
        synchronize(device)
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def make_batch(cfg: ModelConfig, sentences: int, src_len: int, tgt_len: int, device: torch.device) -> tuple:
    """Random real tokens (no padding): src [B, S], tgt_in [B, T] (bos first), tgt_out [B, T]."""
    generator = torch.Generator().manual_seed(0)
    src = torch.randint(4, cfg.vocab_size, (sentences, src_len), generator=generator)
    tgt = torch.randint(4, cfg.vocab_size, (sentences, tgt_len + 1), generator=generator)
    tgt[:, 0] = cfg.bos_id
    return src.to(device), tgt[:, :-1].contiguous().to(device), tgt[:, 1:].contiguous().to(device)


def run(args: argparse.Namespace) -> dict:
    """All measurements of one invocation, as a JSON-ready dict."""
    device = torch.device(args.device)
    dropout = ModelConfig.preset(args.preset).dropout
    # nn.Transformer also drops out attention weights and FFN activations: same work on both sides.
    cfg = ModelConfig.preset(args.preset, vocab_size=args.vocab, attention_dropout=dropout, activation_dropout=dropout)
    batch = make_batch(cfg, args.sentences, args.src_len, args.tgt_len, device)
    dtypes: dict[str, torch.dtype | None] = {"fp32": None, "bf16": torch.bfloat16}
    if device.type == "cuda":
        dtypes = {"bf16": torch.bfloat16}
    builders: dict[str, Callable[[ModelConfig], nn.Module]] = {"nn.Transformer": TorchTransformer}
    builders["mtkit"] = Transformer
    rows = []
    for name, build in builders.items():
        torch.manual_seed(0)
        model = build(cfg).to(device).train()
        for dtype_name, dtype in dtypes.items():
            seconds = time_training(model, batch, dtype, args.steps, args.warmup)
            rows.append({"model": name, "dtype": dtype_name, "step_s": seconds})
    tgt_tokens = args.sentences * args.tgt_len
    flops = training_flops(cfg, args.sentences, args.src_len, args.tgt_len)
    baseline = rows[0]["step_s"]
    # The denominator of MFU: the same measured bf16 matmul peak as flops.py's.
    peak = matmul_gflops("bf16", torch.get_num_threads(), 3.0, "cuda") / 1e3 if device.type == "cuda" else None
    for row in rows:
        row["tgt_tokens_per_s"] = tgt_tokens / row["step_s"]
        row["ratio_to_baseline"] = baseline / row["step_s"]
        row["tflops"] = flops / row["step_s"] / 1e12
        if peak is not None:
            row["mfu"] = row["tflops"] / peak
    return {
        "device": str(device),
        "threads": torch.get_num_threads(),
        "preset": args.preset,
        "batch": {"sentences": args.sentences, "src_len": args.src_len, "tgt_len": args.tgt_len, "vocab": args.vocab},
        "baseline": f"nn.Transformer {rows[0]['dtype']}",
        "matmul_peak_tflops": peak,
        "results": rows,
    }


def print_table(report: dict) -> None:
    batch = report["batch"]
    print(
        f"{report['device']}, {report['threads']} threads, preset {report['preset']}, "
        f"{batch['sentences']} x {batch['src_len']}/{batch['tgt_len']} tokens, vocab {batch['vocab']}"
    )
    if report["matmul_peak_tflops"]:
        print(f"measured bf16 matmul peak: {report['matmul_peak_tflops']:.1f} TFLOP/s")
    print(f"{'model':<16}{'dtype':<7}{'step ms':>10}{'tgt tok/s':>12}{'TFLOP/s':>9}{'vs base':>9}{'MFU':>7}")
    for row in report["results"]:
        mfu = f"{row['mfu']:.1%}" if "mfu" in row else "-"
        print(
            f"{row['model']:<16}{row['dtype']:<7}{row['step_s'] * 1e3:>10.1f}{row['tgt_tokens_per_s']:>12.0f}"
            f"{row['tflops']:>9.3f}{row['ratio_to_baseline']:>8.2f}x{mfu:>7}"
        )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--preset", default=None, help="small on CPU, base on CUDA unless given")
    parser.add_argument("--sentences", type=int, default=None, help="128 on CPU, 256 on CUDA")
    parser.add_argument("--src-len", type=int, default=None, help="16 on CPU, 64 on CUDA")
    parser.add_argument("--tgt-len", type=int, default=None, help="16 on CPU, 64 on CUDA")
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--steps", type=int, default=None, help="timed steps: 3 on CPU, 20 on CUDA")
    parser.add_argument("--warmup", type=int, default=None, help="untimed steps: 1 on CPU, 5 on CUDA")
    parser.add_argument("--json", action="store_true", help="print the results as JSON instead of a table")
    args = parser.parse_args(argv)
    cuda = args.device == "cuda"
    defaults = {"preset": ("small", "base"), "sentences": (128, 256), "src_len": (16, 64), "tgt_len": (16, 64)}
    defaults.update(steps=(3, 20), warmup=(1, 5))
    for name, (cpu_value, cuda_value) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, cuda_value if cuda else cpu_value)
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    report = run(args)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_table(report)


if __name__ == "__main__":
    main()
