"""mtkit's Transformer as a Hugging Face `transformers` Marian model and back: the tensor and option mapping (a
permutation of the model dimension makes the two exactly equal), the Marian config, reading a Marian directory.

Used by mtkit.exports.huggingface (export and import); transformers is an optional extra, imported only when one runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from mtkit.errors import UserError, check
from mtkit.model.transformer import ModelConfig, Transformer

INSTALL_HINT = "transformers is not installed: pip install -e '.[hf]'"
ACTIVATIONS = {"relu": "relu", "swish": "swish"}  # mtkit's name -> transformers' activation_function
IMPORTED_ACTIVATIONS = {"relu": "relu", "swish": "swish", "silu": "swish"}  # transformers' -> mtkit's
SHARES = {  # mtkit share_embeddings -> (share_encoder_decoder_embeddings, tie_word_embeddings)
    "all": (True, True),
    "decoder": (False, True),
    "none": (False, False),
}
# ModelConfig field -> the MarianConfig fields holding the same value (one per stack where Marian has two): an export
# writes them all, an import reads the first and refuses a model whose others differ from it.
SAME_FIELDS = {
    "vocab_size": ("vocab_size",),
    "max_positions": ("max_position_embeddings",),
    "d_model": ("d_model",),
    "encoder_layers": ("encoder_layers",),
    "decoder_layers": ("decoder_layers",),
    "n_heads": ("encoder_attention_heads", "decoder_attention_heads"),
    "d_ff": ("encoder_ffn_dim", "decoder_ffn_dim"),
    "pad_id": ("pad_token_id",),
}
DROPOUTS = ("dropout", "attention_dropout", "activation_dropout")  # one name in both, a float in mtkit
# How each mtkit tensor's d_model axes map onto Marian's (see model_permutation): "cols" the input of a linear or
# an embedding's columns, "rows" a linear's output and its bias, "vector" a LayerNorm's, "none" no d_model axis.
_KINDS = ("cols", "rows", "vector", "none")


def import_transformers() -> Any:
    """The transformers module, or a one-line UserError saying how to install it."""
    try:
        import sentencepiece  # noqa: F401 - MarianTokenizer needs it
        import transformers
    except ImportError:
        raise UserError(INSTALL_HINT) from None
    transformers.utils.logging.disable_progress_bar()  # mtkit reports on stderr itself; no per-tensor bars
    return transformers


def model_permutation(d_model: int) -> Tensor:
    """Marian's model dimension i is mtkit's perm[i].

    Both position tables have the paper's frequencies; mtkit interleaves sin and cos (2i, 2i+1) and Marian puts
    every sin in the first half and every cos in the second. Permuting the residual stream's dimensions (every
    embedding, every linear's input or output on that stream, every LayerNorm, which is invariant to it) turns one
    model into the other exactly; the attention heads' inner dimensions are left in place.
    """
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def _attention(mtkit: str, hf: str, fused: list[str] | None) -> list[tuple[str, list[str], str]]:
    """One attention's tensors: mtkit's fused projection is Marian's q/k/v projections stacked by rows."""
    rows = []
    for name, parts in fused or []:
        rows += [
            (f"{mtkit}.{name}.weight", [f"{hf}.{p}_proj.weight" for p in parts], "cols"),
            (f"{mtkit}.{name}.bias", [f"{hf}.{p}_proj.bias" for p in parts], "none"),
        ]
    return rows + [
        (f"{mtkit}.out.weight", [f"{hf}.out_proj.weight"], "rows"),
        (f"{mtkit}.out.bias", [f"{hf}.out_proj.bias"], "rows"),
    ]


def _feed_forward(mtkit: str, hf: str) -> list[tuple[str, list[str], str]]:
    return [
        (f"{mtkit}.inner.weight", [f"{hf}.fc1.weight"], "cols"),
        (f"{mtkit}.inner.bias", [f"{hf}.fc1.bias"], "none"),
        (f"{mtkit}.outer.weight", [f"{hf}.fc2.weight"], "rows"),
        (f"{mtkit}.outer.bias", [f"{hf}.fc2.bias"], "rows"),
    ]


def _norm(mtkit: str, hf: str) -> list[tuple[str, list[str], str]]:
    return [(f"{mtkit}.weight", [f"{hf}.weight"], "vector"), (f"{mtkit}.bias", [f"{hf}.bias"], "vector")]


def tensor_map(cfg: ModelConfig) -> list[tuple[str, list[str], str]]:
    """(mtkit name, Marian names stacked by rows, kind) for every mtkit tensor (tied ones once)."""
    shared_src, tied = SHARES[cfg.share_embeddings]
    rows = [
        (
            "encoder.embed.tokens.weight",
            ["model.shared.weight" if shared_src else "model.encoder.embed_tokens.weight"],
            "cols",
        )
    ]
    if not shared_src:
        rows.append(("decoder.embed.tokens.weight", ["model.decoder.embed_tokens.weight"], "cols"))
    if not tied:
        rows.append(("output.weight", ["lm_head.weight"], "cols"))
    for i in range(cfg.encoder_layers):
        m, h = f"encoder.layers.{i}", f"model.encoder.layers.{i}"
        rows += _attention(f"{m}.self_attn", f"{h}.self_attn", [("qkv", ["q", "k", "v"])])
        rows += _norm(f"{m}.residuals.0.norm", f"{h}.self_attn_layer_norm")
        rows += _feed_forward(f"{m}.feed_forward", h) + _norm(f"{m}.residuals.1.norm", f"{h}.final_layer_norm")
    for i in range(cfg.decoder_layers):
        m, h = f"decoder.layers.{i}", f"model.decoder.layers.{i}"
        rows += _attention(f"{m}.self_attn", f"{h}.self_attn", [("qkv", ["q", "k", "v"])])
        rows += _norm(f"{m}.residuals.0.norm", f"{h}.self_attn_layer_norm")
        rows += _attention(f"{m}.cross_attn", f"{h}.encoder_attn", [("q", ["q"]), ("kv", ["k", "v"])])
        rows += _norm(f"{m}.residuals.1.norm", f"{h}.encoder_attn_layer_norm")
        rows += _feed_forward(f"{m}.feed_forward", h) + _norm(f"{m}.residuals.2.norm", f"{h}.final_layer_norm")
    return rows


def _permute(tensor: Tensor, kind: str, index: Tensor) -> Tensor:
    if kind == "cols":
        return tensor[:, index]
    if kind in ("rows", "vector"):
        return tensor[index]
    return tensor


def to_marian_state(model: Transformer) -> dict[str, Tensor]:
    """Marian's tensors (float32 copies) holding `model`'s weights; final_logits_bias [1, V] included."""
    cfg, state = model.cfg, model.state_dict()
    perm = model_permutation(cfg.d_model)
    out: dict[str, Tensor] = {}
    for name, hf_names, kind in tensor_map(cfg):
        tensor = _permute(state[name].detach().float().cpu(), kind, perm)
        for hf_name, part in zip(hf_names, tensor.chunk(len(hf_names), dim=0)):
            out[hf_name] = part.clone()
    bias = state.get("output.bias")
    out["final_logits_bias"] = (
        bias.detach().float().cpu() if bias is not None else torch.zeros(cfg.target_vocab_size)
    )[None].clone()
    return out


def from_marian_state(hf_state: dict[str, Tensor], cfg: ModelConfig) -> dict[str, Tensor]:
    """mtkit's state dict (tied tensors under each of their names) from Marian's tensors."""
    inverse = torch.argsort(model_permutation(cfg.d_model))
    state = {}
    for name, hf_names, kind in tensor_map(cfg):
        tensor = torch.cat([hf_state[h].detach().float() for h in hf_names], dim=0)
        state[name] = _permute(tensor, kind, inverse).contiguous()
    shared_src, tied = SHARES[cfg.share_embeddings]
    if shared_src:
        state["decoder.embed.tokens.weight"] = state["encoder.embed.tokens.weight"]
    if tied:
        state["output.weight"] = state["decoder.embed.tokens.weight"]
    if cfg.output_bias:
        state["output.bias"] = hf_state["final_logits_bias"].detach().float().reshape(-1).clone()
    return state


def check_exportable(cfg: ModelConfig, where: str) -> None:
    """Refuse, in one line naming the option, a model that MarianMTModel cannot represent."""
    check(
        cfg.norm == "post", f"{where}: model option norm={cfg.norm!r} has no MarianMTModel equivalent (post-norm only)"
    )
    check(
        cfg.positions == "sinusoidal",
        f"{where}: model option positions={cfg.positions!r} has no MarianMTModel equivalent (sinusoidal only)",
    )
    check(
        cfg.d_model % 2 == 0,
        f"{where}: model option d_model={cfg.d_model} is odd; Marian's position table needs it even",
    )


def marian_config(transformers: Any, cfg: ModelConfig) -> Any:
    """The MarianConfig of an mtkit model (post-norm, sinusoidal, scaled embeddings)."""
    shared_src, tied = SHARES[cfg.share_embeddings]
    return transformers.MarianConfig(
        **{name: getattr(cfg, field) for field, names in SAME_FIELDS.items() for name in names},
        **{name: getattr(cfg, name) for name in DROPOUTS},
        decoder_vocab_size=cfg.target_vocab_size,
        activation_function=ACTIVATIONS[cfg.activation],
        scale_embedding=True,
        eos_token_id=cfg.eos_id,
        forced_eos_token_id=cfg.eos_id,
        bos_token_id=None if cfg.bos_id == cfg.pad_id else cfg.bos_id,
        decoder_start_token_id=cfg.start_id,
        share_encoder_decoder_embeddings=shared_src,
        tie_word_embeddings=tied,
    )


def build_marian(transformers: Any, model: Transformer) -> Any:
    """A float32 MarianMTModel computing what `model` computes."""
    hf = transformers.MarianMTModel(marian_config(transformers, model.cfg)).float().eval()
    weights = to_marian_state(model)
    own = hf.state_dict()
    missing = sorted(set(weights) - set(own))
    assert not missing, f"Marian has no tensors {missing[:3]}"  # a bug in tensor_map, not a user error
    with torch.no_grad():
        for name, tensor in weights.items():
            own[name].copy_(tensor)
    return hf


def config_to_mtkit(config: Any, where: str, bias_nonzero: bool = True) -> ModelConfig:
    """The ModelConfig of a MarianConfig; a field mtkit cannot represent is refused in one line naming it.
    `bias_nonzero`: whether final_logits_bias has a non-zero value (an all-zero one needs no output bias)."""

    def refuse(field: str, why: str) -> UserError:
        return UserError(f"{where}: config field {field}={getattr(config, field, None)!r} {why}")

    if getattr(config, "model_type", None) != "marian":
        raise refuse("model_type", "is not a Marian model (only MarianMTModel directories can be imported)")
    if not getattr(config, "scale_embedding", False):
        raise refuse("scale_embedding", "has no mtkit equivalent (mtkit scales embeddings by sqrt(d_model))")
    if config.activation_function not in IMPORTED_ACTIVATIONS:
        raise refuse("activation_function", f"has no mtkit equivalent ({', '.join(IMPORTED_ACTIVATIONS)} only)")
    for first, *others in SAME_FIELDS.values():
        for other in others:
            if getattr(config, first) != getattr(config, other):
                raise refuse(other, f"differs from {first}; mtkit uses one value for both stacks")
    for field in ("encoder_layerdrop", "decoder_layerdrop"):
        if getattr(config, field, 0.0):
            raise refuse(field, "has no mtkit equivalent")
    shares = (bool(config.share_encoder_decoder_embeddings), bool(config.tie_word_embeddings))
    if shares not in SHARES.values():
        raise refuse(
            "tie_word_embeddings", "with shared encoder/decoder embeddings but an untied output has no mtkit equivalent"
        )
    target_size = config.decoder_vocab_size or config.vocab_size
    bos = config.bos_token_id if config.bos_token_id is not None else config.pad_token_id
    start = (
        None if config.decoder_start_token_id == bos else config.decoder_start_token_id
    )  # None: bos, mtkit's default
    try:
        return ModelConfig(
            **{field: getattr(config, names[0]) for field, names in SAME_FIELDS.items()},
            **{name: float(getattr(config, name)) for name in DROPOUTS},
            share_embeddings=next(k for k, v in SHARES.items() if v == shares),
            bos_id=bos,
            eos_id=_single(config.eos_token_id),
            activation=IMPORTED_ACTIVATIONS[config.activation_function],
            output_bias=bias_nonzero,
            decoder_start_id=start,
            tgt_vocab_size=None if target_size == config.vocab_size else target_size,
        )
    except (TypeError, ValueError, UserError) as exc:
        raise UserError(f"{where}: cannot be represented in mtkit: {exc}") from None


def _single(value: Any) -> Any:
    """eos_token_id may be a list in newer configs; mtkit has one eos."""
    if isinstance(value, (list, tuple)):
        check(len(value) == 1, f"config field eos_token_id={value!r}: mtkit has a single end token")
        return value[0]
    return value


def load_marian(transformers: Any, path: Path) -> tuple[Any, ModelConfig]:
    """A local MarianMTModel directory's model (float32, eval) and its mtkit ModelConfig."""
    check((path / "config.json").is_file(), f"{path}: no config.json; not a Hugging Face model directory")
    try:
        config = transformers.AutoConfig.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: cannot read config.json ({exc})") from None
    config_to_mtkit(config, str(path))  # refuse an unrepresentable model before loading its weights
    try:
        model = transformers.MarianMTModel.from_pretrained(str(path), local_files_only=True, dtype=torch.float32)
    except (OSError, ValueError) as exc:
        raise UserError(f"{path}: cannot load the model ({exc})") from None
    return model.eval(), config_to_mtkit(config, str(path), bool(model.final_logits_bias.any()))


def read_vocab(path: Path) -> list[str]:
    """A vocab.json (piece -> id) as the list of pieces in id order; ids must be 0..n-1."""
    check(path.is_file(), f"{path}: no such file")
    table = json.loads(path.read_text(encoding="utf-8"))
    pieces = sorted(table, key=table.get)
    check([table[p] for p in pieces] == list(range(len(pieces))), f"{path}: ids are not 0..{len(pieces) - 1}")
    return pieces
