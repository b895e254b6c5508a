"""The Transformer of "Attention Is All You Need": ModelConfig and presets, attention (spelled out on CPU,
scaled_dot_product_attention elsewhere), padding masks, and the encoder-decoder wired from mtkit.model.layers' parts,
decoding through mtkit.model.kvcache's key/value cache.
Imports torch and mtkit.errors (a bad ModelConfig value is a UserError) only: no IO, data, recipe or search code.
"""

# Shape letters: B batch, S source length, T target length, D d_model, H n_heads, V vocab_size,
# L length of whichever sequence a layer sees, N decoding rows (sentences x beams), M stored source
# entries (N / group), t tokens decoded so far.

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mtkit.errors import check
from mtkit.model.kvcache import DecodeState, LayerCache, grow, reorder_state
from mtkit.model.layers import (
    LAYER_NORM_EPSILON,
    Embedding,
    FeedForward,
    Residual,
    init_embedding,
    init_linear,
)
from mtkit.model.onednn import Linear

PRESETS: dict[str, dict[str, int | float]] = {
    "base": dict(d_model=512, n_heads=8, d_ff=2048, encoder_layers=6, decoder_layers=6, dropout=0.1),
    "big": dict(d_model=1024, n_heads=16, d_ff=4096, encoder_layers=6, decoder_layers=6, dropout=0.3),
    "small": dict(d_model=256, n_heads=4, d_ff=1024, encoder_layers=3, decoder_layers=3, dropout=0.1),
    "tiny": dict(d_model=64, n_heads=2, d_ff=128, encoder_layers=2, decoder_layers=2, dropout=0.1),
}


def preset_name(model_cfg: ModelConfig) -> str | None:
    """The preset whose sizes the model has (dropout aside), if any."""
    sizes = ("d_model", "n_heads", "d_ff", "encoder_layers", "decoder_layers")
    return next(
        (name for name, values in PRESETS.items() if all(values[key] == getattr(model_cfg, key) for key in sizes)), None
    )


_FIRST_CAPACITY = 32  # decoder cache positions allocated up front; doubled when full
_CHOICES = {
    "norm": ("post", "pre"),
    "positions": ("sinusoidal", "learned"),
    "share_embeddings": ("all", "decoder", "none"),
    "activation": ("relu", "swish"),
}


@dataclass
class ModelConfig:
    """Sizes and options of the Transformer, each a [model] recipe key; the defaults are the paper's base model."""

    vocab_size: int = field(
        default=8000, metadata={"help": "Vocabulary size: the source's, and the target's unless tgt_vocab_size."}
    )
    d_model: int = field(default=512, metadata={"help": "Width of the embeddings and of every layer's output."})
    n_heads: int = field(default=8, metadata={"help": "Attention heads (d_model divisible by it)."})
    d_ff: int = field(default=2048, metadata={"help": "Width of the feed-forward layers' inner layer."})
    encoder_layers: int = field(default=6, metadata={"help": "Encoder layers."})
    decoder_layers: int = field(default=6, metadata={"help": "Decoder layers."})
    dropout: float = field(default=0.1, metadata={"help": "Dropout on the embeddings and each sublayer's output."})
    attention_dropout: float = field(default=0.0, metadata={"help": "Dropout on the attention weights."})
    activation_dropout: float = field(default=0.0, metadata={"help": "Dropout after the feed-forward activation."})
    norm: str = field(
        default="post", metadata={"help": '"post" (the paper) or "pre" (adds a final LayerNorm to each stack).'}
    )
    positions: str = field(default="sinusoidal", metadata={"help": 'Position embeddings: "sinusoidal" or "learned".'})
    max_positions: int = field(default=1024, metadata={"help": "Longest sequence the model takes (tokens)."})
    share_embeddings: str = field(
        default="all", metadata={"help": '"all": src = tgt = output; "decoder": tgt = output; "none".'}
    )
    pad_id: int = field(default=0, metadata={"help": "The padding token's id."})
    bos_id: int = field(default=2, metadata={"help": "The beginning-of-sentence token's id."})
    eos_id: int = field(default=3, metadata={"help": "The end-of-sentence token's id."})
    # Options that models trained elsewhere need (Marian's opus-mt: mtkit.exports.huggingface); the defaults are the
    # paper's.
    activation: str = field(default="relu", metadata={"help": 'The FFN\'s: "relu" (the paper) or "swish" (SiLU).'})
    output_bias: bool = field(default=False, metadata={"help": "A bias on the pre-softmax projection."})
    decoder_start_id: int | None = field(
        default=None, metadata={"help": "The decoder's first input token (None: bos_id)."}
    )
    tgt_vocab_size: int | None = field(
        default=None, metadata={"help": "Target embedding and output size (None: vocab_size)."}
    )

    @property
    def start_id(self) -> int:
        """The token every target sequence starts from (training's tgt_in, search's first step)."""
        return self.bos_id if self.decoder_start_id is None else self.decoder_start_id

    @property
    def target_vocab_size(self) -> int:
        return self.vocab_size if self.tgt_vocab_size is None else self.tgt_vocab_size

    def __post_init__(self) -> None:
        for name, choices in _CHOICES.items():
            value = getattr(self, name)
            check(value in choices, f"model.{name} must be one of {', '.join(choices)}; got {value!r}")
        sizes = ("vocab_size", "d_model", "n_heads", "d_ff", "encoder_layers", "decoder_layers", "max_positions")
        for name in sizes:
            check(getattr(self, name) >= 1, f"model.{name} must be at least 1; got {getattr(self, name)}")
        check(
            self.d_model % self.n_heads == 0,
            f"model.d_model ({self.d_model}) must be divisible by model.n_heads ({self.n_heads})",
        )
        for name in ("dropout", "attention_dropout", "activation_dropout"):
            check(0.0 <= getattr(self, name) < 1.0, f"model.{name} must be in [0, 1); got {getattr(self, name)}")
        check(self.target_vocab_size >= 1, f"model.tgt_vocab_size must be at least 1; got {self.tgt_vocab_size}")
        check(
            self.share_embeddings != "all" or self.target_vocab_size == self.vocab_size,
            "model.share_embeddings='all' needs model.tgt_vocab_size equal to vocab_size (or unset)",
        )
        for name in ("pad_id", "bos_id", "eos_id", "decoder_start_id"):
            value, size = getattr(self, name), min(self.vocab_size, self.target_vocab_size)
            check(
                value is None or 0 <= value < size, f"model.{name} ({value}) must be below the vocabulary size ({size})"
            )

    @classmethod
    def preset(cls, name: str, **overrides: int | float | str) -> ModelConfig:
        """A named size ("base", "big", "small", "tiny") with optional field overrides."""
        check(name in PRESETS, f"unknown model preset {name!r}; valid presets: {', '.join(PRESETS)}")
        return cls(**{**PRESETS[name], **overrides})


def alignment_layer(layers: int) -> int:
    """The decoder layer whose cross-attention aligns an output with its source: the one before the last (the last of
    a one-layer decoder), as Garg et al. (2019) found for the Transformer and mtkit.model.alignment measured."""
    return layers - 2 if layers > 1 else 0


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool, dropout_p: float) -> Tensor:
    """softmax(q k^T / sqrt(d_k)) v: q [B, H, L, D/H], k and v [B, H, S, D/H] -> [B, H, L, D/H].

    mask [B, 1, 1, S] bool is True where a key may be attended. The one place attention is computed,
    so tests can swap in an explicit reference.
    """
    if q.device.type == "cpu":
        if _tileable(q, k) and not torch.is_grad_enabled():
            return _tiled_attention(q, k, v, mask, causal)
        return _cpu_attention(q, k, v, mask, causal, dropout_p)
    return F.scaled_dot_product_attention(q, k, v, mask, dropout_p, is_causal=causal)


def _cpu_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool, dropout_p: float) -> Tensor:
    """Attention on CPU, spelled out. At MT sentence lengths it beats every SDPA CPU kernel: training
    fwd+bwd 1.7-2.2x SDPA's math kernel in bf16 (which upcasts q/k/v and runs its GEMMs in float32) and
    1.1-1.25x in fp32; decoding 1.05-1.5x the flash kernel (2.9x for a sentence's beams as one query
    group). The two GEMMs run in the input dtype and only the softmax sums in float32, as fairseq's."""
    scores = torch.matmul(q * q.size(-1) ** -0.5, k.transpose(-1, -2))  # [B, H, L, S]
    if causal:
        future = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).triu_(1)  # [L, S]
        scores.masked_fill_(future, float("-inf"))  # in place: matmul's backward needs q and k, not scores
    if mask is not None:
        scores.masked_fill_(~mask, float("-inf"))
    probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    if dropout_p > 0:
        probs = F.dropout(probs, dropout_p, True)
    return torch.matmul(probs, v)  # [B, H, L, D/H]


# Inference on CPU in float32 computes attention whose queries and keys are whole tiles of this many positions (a
# padded source's self-attention; also a target scored whole when its length is a multiple of 16): MKL's
# sgemm rounds a product's last rows by the matrix's size (its AVX2 kernels on an Intel CPU: rows 30-31 of a 32 x 32
# product differ in the last bit from the same rows of a 64 x 64 one), so a sentence's encoding would depend on the
# width of the batch it is padded to. Tiled, every product has one shape whatever the batch. Decoding steps of
# fewer than 16 beams are left as they are (a step's queries are one sentence's beams, the same alone and in a
# batch): tiling them too made greedy scores batch-dependent on an AVX-512 CPU.
ATTENTION_TILE = 16


def _tileable(q: Tensor, k: Tensor) -> bool:
    """Queries and keys whole numbers of tiles (sources are padded to a multiple of ATTENTION_TILE), float32,
    the dtype whose batch independence is claimed."""
    return q.dtype == torch.float32 and q.size(-2) % ATTENTION_TILE == 0 and k.size(-2) % ATTENTION_TILE == 0


def _tiled_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool) -> Tensor:
    """_cpu_attention's values computed in ATTENTION_TILE-sized products, for inference: [B, H, L, D/H].

    The scores come from [tile, D/H] x [D/H, tile] products; the output sums the [tile, tile] x [tile, D/H]
    products key tile by key tile, in order, so a padded key tile (probability 0) adds an exact 0."""
    batch, heads, queries, depth = q.shape
    keys, tile = k.size(-2), ATTENTION_TILE
    q_tiles, k_tiles = queries // tile, keys // tile
    qt = (q * depth**-0.5).reshape(batch, heads, q_tiles, 1, tile, depth)
    kt = k.reshape(batch, heads, 1, k_tiles, tile, depth).transpose(-1, -2)
    scores = torch.matmul(qt, kt).permute(0, 1, 2, 4, 3, 5).reshape(batch, heads, queries, keys)
    if causal:
        scores.masked_fill_(torch.ones(queries, keys, dtype=torch.bool, device=q.device).triu_(1), float("-inf"))
    if mask is not None:
        scores.masked_fill_(~mask, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    pt = probs.reshape(batch, heads, q_tiles, tile, k_tiles, tile).permute(0, 1, 2, 4, 3, 5)
    parts = torch.matmul(pt, v.reshape(batch, heads, 1, k_tiles, tile, depth))  # per key tile
    out = parts[:, :, :, 0]
    for index in range(1, k_tiles):
        out = out + parts[:, :, :, index]
    return out.reshape(batch, heads, queries, depth)


def attend_mask(pad: Tensor) -> Tensor:
    """Key mask for SDPA from a padding mask: [B, S] bool (True = pad) -> [B, 1, 1, S] (True = attend).

    A row that is all padding attends to everything instead: a fully masked row is NaN in some SDPA
    backends, and the row is garbage that nobody reads either way. Rows never mix.
    """
    keep = ~pad | pad.all(dim=1, keepdim=True)  # [B, S]
    return keep[:, None, None, :]  # [B, 1, 1, S]


class SelfAttention(nn.Module):
    """Multi-head self-attention with one fused q/k/v projection; `step` appends to a key/value cache."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_heads = cfg.n_heads
        self.dropout_p = cfg.attention_dropout
        self.qkv = init_linear(cfg.d_model, 3 * cfg.d_model, blocks=3)
        self.out = init_linear(cfg.d_model, cfg.d_model)

    def forward(self, x: Tensor, mask: Tensor | None, causal: bool) -> Tensor:
        """x [B, L, D] -> [B, L, D]."""
        B, L, D = x.shape
        qkv = self.qkv(x).view(B, L, 3, self.n_heads, D // self.n_heads)  # [B, L, 3, H, D/H]
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # 3 x [B, H, L, D/H]
        dropout_p = self.dropout_p if self.training else 0.0
        y = attention(q, k, v, mask, causal, dropout_p)  # [B, H, L, D/H]
        return self.out(y.transpose(1, 2).reshape(B, L, D))  # [B, L, D]

    def step(self, x: Tensor, keys: Tensor, values: Tensor, t: int) -> Tensor:
        """Position t: x [N, 1, D] -> [N, 1, D]; writes its key/value into the cache [N, H, >t, D/H]."""
        N, _, D = x.shape
        q, k, v = self.qkv(x).view(N, 3, self.n_heads, D // self.n_heads).unbind(1)  # 3 x [N, H, D/H]
        keys[:, :, t] = k
        values[:, :, t] = v
        # The single query is the newest position: every cached key is legal, so no mask.
        y = attention(q[:, :, None], keys[:, :, : t + 1], values[:, :, : t + 1], None, False, 0.0)  # [N, H, 1, D/H]
        return self.out(y.reshape(N, 1, D))  # [N, 1, D]


class CrossAttention(nn.Module):
    """Encoder-decoder attention; keys and values come from `project_memory`, computed once per source."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_heads = cfg.n_heads
        self.dropout_p = cfg.attention_dropout
        self.q = init_linear(cfg.d_model, cfg.d_model)
        self.kv = init_linear(cfg.d_model, 2 * cfg.d_model, blocks=2)
        self.out = init_linear(cfg.d_model, cfg.d_model)

    def project_memory(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        """memory [B, S, D] -> keys, values [B, H, S, D/H]."""
        B, S, D = memory.shape
        kv = self.kv(memory).view(B, S, 2, self.n_heads, D // self.n_heads)  # [B, S, 2, H, D/H]
        keys, values = kv.permute(2, 0, 3, 1, 4).unbind(0)  # 2 x [B, H, S, D/H]
        return keys, values

    def query(self, x: Tensor) -> Tensor:
        """x [B, L, D] -> the queries [B, H, L, D/H]."""
        B, L, D = x.shape
        return self.q(x).view(B, L, self.n_heads, D // self.n_heads).transpose(1, 2)

    def weights(self, q: Tensor, keys: Tensor, mask: Tensor) -> Tensor:
        """The attention weights of queries q [B, H, L, D/H] over keys [B, H, S, D/H] under mask [B, 1, 1, S],
        averaged over heads -> [B, L, S] float32: softmax(q k^T / sqrt(D/H)) in float32, apart from `attend`, whose
        kernels and numerics stay as they are (mtkit.model.alignment's word alignment)."""
        scores = (q.float() @ keys.float().transpose(-1, -2)) / q.size(-1) ** 0.5  # [B, H, L, S]
        return scores.masked_fill(~mask, float("-inf")).softmax(dim=-1).mean(dim=1)

    def attend(self, q: Tensor, keys: Tensor, values: Tensor, mask: Tensor) -> Tensor:
        """Queries q [B, H, L, D/H] attend to keys/values [B, H, S, D/H] under mask [B, 1, 1, S] -> [B, L, D]."""
        B, _, L, _ = q.shape
        dropout_p = self.dropout_p if self.training else 0.0
        y = attention(q, keys, values, mask, False, dropout_p)  # [B, H, L, D/H]
        return self.out(y.transpose(1, 2).reshape(B, L, -1))  # [B, L, D]

    def forward(self, x: Tensor, keys: Tensor, values: Tensor, mask: Tensor) -> Tensor:
        """x [B, L, D] attends to keys/values [B, H, S, D/H] under mask [B, 1, 1, S] -> [B, L, D]."""
        return self.attend(self.query(x), keys, values, mask)


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each inside a residual."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.self_attn = SelfAttention(cfg)
        self.feed_forward = FeedForward(cfg.d_model, cfg.d_ff, cfg.activation, cfg.activation_dropout)
        self.residuals = nn.ModuleList([Residual(cfg.d_model, cfg.norm == "pre", cfg.dropout) for _ in range(2)])

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        """x [B, S, D], mask [B, 1, 1, S] -> [B, S, D]."""
        r_attn, r_ff = self.residuals
        x = r_attn.after(x, self.self_attn(r_attn.before(x), mask, causal=False))
        return r_ff.after(x, self.feed_forward(r_ff.before(x)))


class DecoderLayer(nn.Module):
    """Causal self-attention, cross-attention, feed-forward; `step` runs one position from a cache."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.self_attn = SelfAttention(cfg)
        self.cross_attn = CrossAttention(cfg)
        self.feed_forward = FeedForward(cfg.d_model, cfg.d_ff, cfg.activation, cfg.activation_dropout)
        self.residuals = nn.ModuleList([Residual(cfg.d_model, cfg.norm == "pre", cfg.dropout) for _ in range(3)])

    def forward(self, x: Tensor, keys: Tensor, values: Tensor, mask: Tensor) -> Tensor:
        """x [B, T, D]; cross keys/values [B, H, S, D/H]; mask [B, 1, 1, S] -> [B, T, D].

        Causal masking alone is enough: targets are padded at the end, so a real position never sees pad.
        """
        r_self, r_cross, r_ff = self.residuals
        x = r_self.after(x, self.self_attn(r_self.before(x), None, causal=True))
        x = r_cross.after(x, self.cross_attn(r_cross.before(x), keys, values, mask))
        return r_ff.after(x, self.feed_forward(r_ff.before(x)))

    def step(
        self, x: Tensor, cache: LayerCache, mask: Tensor, t: int, group: int = 1, weights: list[Tensor] | None = None
    ) -> Tensor:
        """Position t: x [N, 1, D] -> [N, 1, D]; writes its self-attention keys/values into the cache, and where
        `weights` is given appends this step's cross-attention weights [N, S] (CrossAttention.weights) to it.

        The cross keys/values and mask hold one entry per `group` consecutive rows: the group's rows
        attend as `group` queries of one sequence ([N / group, group, D]), which is the same attention.
        """
        r_self, r_cross, r_ff = self.residuals
        x = r_self.after(x, self.self_attn.step(r_self.before(x), cache.keys, cache.values, t))
        queries = self.cross_attn.query(r_cross.before(x).view(-1, group, x.shape[-1]))  # [M, H, group, D/H]
        if weights is not None:
            weights.append(self.cross_attn.weights(queries, cache.cross_keys, mask).view(x.shape[0], -1))
        y = self.cross_attn.attend(queries, cache.cross_keys, cache.cross_values, mask).view(x.shape)
        x = r_cross.after(x, y)
        return r_ff.after(x, self.feed_forward(r_ff.before(x)))


class Stack(nn.Module):
    """Embedding, layers and (pre-norm only) the final LayerNorm of the encoder or the decoder."""

    def __init__(self, cfg: ModelConfig, tokens: nn.Embedding, layers: list[nn.Module]) -> None:
        super().__init__()
        self.embed = Embedding(tokens, cfg.d_model, cfg.max_positions, cfg.positions == "learned", cfg.dropout)
        self.layers = nn.ModuleList(layers)
        self.final_norm = nn.LayerNorm(cfg.d_model, eps=LAYER_NORM_EPSILON) if cfg.norm == "pre" else nn.Identity()


class Transformer(nn.Module):
    """The encoder-decoder Transformer with tied or untied embeddings and a key/value-cached decoder."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        src_tokens = nn.Embedding(cfg.vocab_size, cfg.d_model, padding_idx=cfg.pad_id)
        tgt_tokens = src_tokens
        if cfg.share_embeddings != "all":
            tgt_tokens = nn.Embedding(cfg.target_vocab_size, cfg.d_model, padding_idx=cfg.pad_id)
        self.encoder = Stack(cfg, src_tokens, [EncoderLayer(cfg) for _ in range(cfg.encoder_layers)])
        self.decoder = Stack(cfg, tgt_tokens, [DecoderLayer(cfg) for _ in range(cfg.decoder_layers)])
        self.output = Linear(cfg.d_model, cfg.target_vocab_size, bias=cfg.output_bias)
        if self.output.bias is not None:
            nn.init.zeros_(self.output.bias)
        for tokens in {id(src_tokens): src_tokens, id(tgt_tokens): tgt_tokens}.values():
            init_embedding(tokens.weight, cfg.d_model, cfg.pad_id)
        if cfg.share_embeddings == "none":
            init_embedding(self.output.weight, cfg.d_model, None)
        else:  # Tied pre-softmax projection (paper section 3.4): logits = hidden @ E^T.
            self.output.weight = tgt_tokens.weight

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """src [B, S], tgt_in [B, T] -> logits [B, T, V]."""
        return self.project(self.decode(tgt_in, *self.encode(src)))

    def encode(self, src: Tensor) -> tuple[Tensor, Tensor]:
        """src [B, S] -> memory [B, S, D], src_pad [B, S] bool (True = pad)."""
        src_pad = src == self.cfg.pad_id  # [B, S]
        mask = attend_mask(src_pad)
        x = self.encoder.embed(src)
        for layer in self.encoder.layers:
            x = layer(x, mask)
        return self.encoder.final_norm(x), src_pad

    def decode(self, tgt_in: Tensor, memory: Tensor, src_pad: Tensor) -> Tensor:
        """tgt_in [B, T] -> hidden [B, T, D], final-normed but not projected (callers may drop pad first)."""
        mask = attend_mask(src_pad)
        x = self.decoder.embed(tgt_in)
        for layer in self.decoder.layers:
            x = layer(x, *layer.cross_attn.project_memory(memory), mask)
        return self.decoder.final_norm(x)

    def project(self, hidden: Tensor) -> Tensor:
        """hidden [..., D] -> logits [..., V]."""
        return self.output(hidden)

    @torch.no_grad()  # decoding only: the caches are written in place
    def init_decode_state(self, src: Tensor, align: bool = False) -> DecodeState:
        """Run the encoder once and project every layer's cross-attention keys/values once; `align`: every step
        keeps its alignment layer's cross-attention weights (DecodeState.weights)."""
        memory, src_pad = self.encode(src)
        layers = []
        for layer in self.decoder.layers:
            # Contiguous once here: as views of the fused projection, every step's matmul would copy them.
            cross_keys, cross_values = (
                t.contiguous() for t in layer.cross_attn.project_memory(memory)
            )  # [B, H, S, D/H]
            shape = cross_keys.shape[:2] + (_FIRST_CAPACITY, cross_keys.shape[3])  # [B, H, capacity, D/H]
            self_keys, self_values = cross_keys.new_empty(shape), cross_keys.new_empty(shape)
            layers.append(LayerCache(self_keys, self_values, cross_keys, cross_values))
        return DecodeState(attend_mask(src_pad), layers, align=align)

    @torch.no_grad()
    def decode_step(self, tokens: Tensor, state: DecodeState) -> Tensor:
        """tokens [N] (the last token of each row, bos first) -> logits [N, V]; advances the state."""
        return self.project(self.decode_hidden(tokens, state))

    @torch.no_grad()
    def decode_hidden(self, tokens: Tensor, state: DecodeState) -> Tensor:
        """decode_step before the output projection: -> hidden [N, D] (search projects it chunk by chunk)."""
        x = self.decoder.embed(tokens[:, None], start=state.position)  # [N, 1, D]
        if state.position == state.layers[0].keys.shape[2]:
            grow(state)
        kept: list[Tensor] | None = [] if state.align else None
        aligning = alignment_layer(len(self.decoder.layers))
        for k, (layer, cache) in enumerate(zip(self.decoder.layers, state.layers)):
            x = layer.step(x, cache, state.memory_mask, state.position, state.group, kept if k == aligning else None)
        state.weights = kept[0] if kept else None
        state.position += 1
        return self.decoder.final_norm(x[:, 0])

    @torch.no_grad()
    def reorder_decode_state(self, state: DecodeState, order: Tensor) -> DecodeState:
        """Row n of the result is row order[n] of state: beam reordering, expansion, dropping rows."""
        return reorder_state(state, order)
