"""Export a run's model to CTranslate2's format, through CTranslate2's own spec API (the checkpoint read by
mtkit.exports.source).

The output directory is served with CTranslate2 and sentencepiece alone (no mtkit, no torch). No training
code here; ctranslate2 is an optional extra, imported only when an export runs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

import torch

from mtkit.corpus.shortlist_record import read_shortlist
from mtkit.errors import UserError, check
from mtkit.exports.ctranslate2_library import import_ctranslate2
from mtkit.exports.source import read_for_export
from mtkit.file_names import METADATA_NAME, README_NAME, SHORTLIST_NAME, SPM_NAME
from mtkit.files import atomic_directory
from mtkit.model.layers import LAYER_NORM_EPSILON, sinusoidal_positions
from mtkit.model.transformer import ModelConfig, Transformer
from mtkit.runs.checkpoint_files import run_directory
from mtkit.search.config import TranslateConfig
from mtkit.tokenizer import TableTokenizer

QUANTIZATIONS = ("int8", "int8_float32", "float16", "bfloat16")
# Every ModelConfig option and the values the CTranslate2 Transformer spec expresses (None: any value).
# An option missing here (a newer mtkit's) is refused rather than silently exported as something else.
EXPRESSIBLE: dict[str, tuple[Any, ...] | None] = {
    "vocab_size": None,
    "d_model": None,
    "n_heads": None,
    "d_ff": None,
    "encoder_layers": None,
    "decoder_layers": None,
    "max_positions": None,
    "pad_id": None,
    "bos_id": None,
    "eos_id": None,
    "dropout": None,
    "attention_dropout": None,
    "activation_dropout": None,  # training only
    "norm": ("post", "pre"),
    "positions": ("sinusoidal", "learned"),  # both written as an explicit table of position encodings
    "share_embeddings": ("all", "decoder", "none"),  # tied variables are stored once (spec.optimize)
    "activation": ("relu", "swish"),
    "output_bias": (False, True),
    "decoder_start_id": None,
    "tgt_vocab_size": None,
}


def check_expressible(model_options: dict[str, Any], where: str) -> None:
    """Refuse, in one line naming it, a model option that CTranslate2's Transformer cannot express."""
    for name, value in model_options.items():
        check(name in EXPRESSIBLE, f"{where}: model option {name}={value!r} has no CTranslate2 equivalent")
        allowed = EXPRESSIBLE[name]
        check(
            allowed is None or value in allowed,
            f"{where}: model option {name}={value!r} has no CTranslate2 equivalent "
            f"(exportable: {', '.join(map(str, allowed or ()))})",
        )


def export_ctranslate2(path: str | Path, out: str | Path, quantization: str | None = None) -> dict[str, Any]:
    """Write RUN_DIR's model (or a checkpoint's) as a CTranslate2 model directory with spm.model beside it.

    Written atomically: `out` appears complete or not at all. Returns a summary (paths, sizes, settings).
    """
    check(
        quantization is None or quantization in QUANTIZATIONS,
        f"--quantization must be one of {', '.join(QUANTIZATIONS)}; got {quantization!r}",
    )
    ctranslate2 = import_ctranslate2(specs=True)
    read = read_for_export(path, out, check_expressible)
    source, model, tokenizer, configs, manifest = (
        read.checkpoint,
        read.model,
        read.tokenizer,
        read.configs,
        read.manifest,
    )
    out, step, spm_model = Path(out), read.step, read.spm_model
    pieces, target_pieces = tokenizer.pieces(), tokenizer.target_pieces()
    spec = build_spec(ctranslate2.specs, model, pieces, tokenizer.unk_id, target_pieces)
    shortlist = run_shortlist(source, spm_model)
    if shortlist is not None:  # saved by spec.save as vmap.txt, where CTranslate2's use_vmap reads it
        spec.register_vocabulary_mapping(str(run_directory(source) / SHORTLIST_NAME))
    spec.validate()
    spec.optimize(quantization=quantization)
    try:
        search = TranslateConfig(**configs.get("translate", {}))
    except (TypeError, UserError) as exc:
        raise UserError(f"{source}: translate options: {exc}") from None
    metadata = _metadata(source, step, model.cfg, quantization, search)
    metadata |= {"configs": configs, "manifest": manifest}  # what the run says of itself (mtkit serve's /info)
    metadata["language_codes"] = tokenizer.language_codes()  # a multilingual model's targets: sources begin >>xx<<
    metadata["shortlist"] = shortlist
    with atomic_directory(out) as tmp:
        tmp.chmod(0o755)  # a model directory others may serve (mkdtemp made it private)
        spec.save(str(tmp))
        (tmp / SPM_NAME).write_bytes(spm_model)
        if isinstance(tokenizer, TableTokenizer):  # spm.model is mtkit's bundle: the two models for sentencepiece
            (tmp / "source.spm").write_bytes(tokenizer.models[0])
            (tmp / "target.spm").write_bytes(tokenizer.models[1])
        (tmp / METADATA_NAME).write_text(json.dumps(metadata, indent=2) + "\n", encoding="utf-8")
        (tmp / README_NAME).write_text(usage_readme(metadata), encoding="utf-8")
    files = sorted(p.name for p in out.iterdir())
    size = sum(p.stat().st_size for p in out.iterdir() if p.is_file())
    return {
        "out": str(out),
        "checkpoint": str(source),
        "quantization": quantization or "float32",
        "ctranslate2": ctranslate2.__version__,
        "files": files,
        "bytes": size,
        "shortlist": shortlist is not None,
    }


def run_shortlist(checkpoint: Path, spm_model: bytes) -> dict[str, Any] | None:
    """The record of the shortlist in the checkpoint's run directory (`mtkit shortlist`), None without one; one made
    with another sentencepiece model than the checkpoint's is refused, never exported beside it."""
    info = read_shortlist(run_directory(checkpoint))
    if info is not None:
        check(
            info.get("spm_sha256") == hashlib.sha256(spm_model).hexdigest(),
            f"{run_directory(checkpoint) / SHORTLIST_NAME}: made for another sentencepiece model than {checkpoint}'s; "
            "make it again with `mtkit shortlist`",
        )
    return info


def build_spec(
    specs: Any, model: Transformer, pieces: list[str], unk_id: int, target_pieces: list[str] | None = None
) -> Any:
    """The CTranslate2 TransformerSpec holding `model`'s weights, vocabularies and special tokens."""
    cfg = model.cfg
    target_pieces = target_pieces or pieces
    spec = specs.TransformerSpec.from_config(
        (cfg.encoder_layers, cfg.decoder_layers),
        cfg.n_heads,
        pre_norm=cfg.norm == "pre",
        activation=specs.Activation.SWISH if cfg.activation == "swish" else specs.Activation.RELU,
        # return_attention gives what mtkit.model.alignment reads (the torch engine's word alignment): the layer
        # before the last, every head averaged (0). A change here changes every export: raise EXPORT_REVISION.
        alignment_layer=-2 if cfg.decoder_layers > 1 else -1,
        alignment_heads=0,
    )
    _set_stack(spec.encoder, model.encoder, cfg)
    spec.encoder.embeddings[0].weight = _array(model.encoder.embed.tokens.weight)
    for layer_spec, layer in zip(spec.encoder.layer, model.encoder.layers):
        r_attn, r_ff = layer.residuals
        _set_self_attention(layer_spec.self_attention, layer.self_attn, r_attn.norm)
        _set_feed_forward(layer_spec.ffn, layer.feed_forward, r_ff.norm)
    _set_stack(spec.decoder, model.decoder, cfg)
    spec.decoder.embeddings.weight = _array(model.decoder.embed.tokens.weight)
    _set_linear(spec.decoder.projection, model.output)  # logits = hidden @ W^T (+ bias with output_bias)
    for layer_spec, layer in zip(spec.decoder.layer, model.decoder.layers):
        r_self, r_cross, r_ff = layer.residuals
        _set_self_attention(layer_spec.self_attention, layer.self_attn, r_self.norm)
        _set_cross_attention(layer_spec.attention, layer.cross_attn, r_cross.norm)
        _set_feed_forward(layer_spec.ffn, layer.feed_forward, r_ff.norm)
    spec.register_source_vocabulary(pieces)
    spec.register_target_vocabulary(target_pieces)
    # mtkit's source is its pieces + eos (translate.pad_batch); the decoder starts from its start id (bos unless set).
    spec.config.unk_token = pieces[unk_id]
    spec.config.bos_token = target_pieces[cfg.bos_id]
    spec.config.eos_token = target_pieces[cfg.eos_id]
    spec.config.decoder_start_token = target_pieces[cfg.start_id]
    spec.config.add_source_bos = False
    spec.config.add_source_eos = True
    spec.config.layer_norm_epsilon = LAYER_NORM_EPSILON
    return spec


def _set_stack(stack_spec: Any, stack: Any, cfg: ModelConfig) -> None:
    """Embedding scale, position table (0-based, as mtkit's) and the pre-norm final LayerNorm."""
    stack_spec.scale_embeddings = True  # sqrt(d_model), as mtkit.model.transformer.Embedding
    table = (
        sinusoidal_positions(cfg.max_positions, cfg.d_model)
        if stack.embed.learned is None
        else stack.embed.learned.weight
    )
    stack_spec.position_encodings.encodings = _array(table)
    if cfg.norm == "pre":
        _set_layer_norm(stack_spec.layer_norm, stack.final_norm)


def _set_self_attention(spec: Any, attention: Any, norm: torch.nn.LayerNorm) -> None:
    # mtkit's fused projection is [q; k; v] by rows, the layout CTranslate2's fused linear[0] expects.
    _set_linear(spec.linear[0], attention.qkv)
    _set_linear(spec.linear[1], attention.out)
    _set_layer_norm(spec.layer_norm, norm)


def _set_cross_attention(spec: Any, attention: Any, norm: torch.nn.LayerNorm) -> None:
    _set_linear(spec.linear[0], attention.q)
    _set_linear(spec.linear[1], attention.kv)  # [k; v] by rows, as CTranslate2's fused memory projection
    _set_linear(spec.linear[2], attention.out)
    _set_layer_norm(spec.layer_norm, norm)


def _set_feed_forward(spec: Any, feed_forward: Any, norm: torch.nn.LayerNorm) -> None:
    _set_linear(spec.linear_0, feed_forward.inner)
    _set_linear(spec.linear_1, feed_forward.outer)
    _set_layer_norm(spec.layer_norm, norm)


def _set_linear(spec: Any, linear: torch.nn.Linear) -> None:
    spec.weight = _array(linear.weight)
    if linear.bias is not None:
        spec.bias = _array(linear.bias)


def _set_layer_norm(spec: Any, norm: torch.nn.LayerNorm) -> None:
    spec.gamma = _array(norm.weight)
    spec.beta = _array(norm.bias)


def _array(tensor: torch.Tensor) -> Any:
    """A float32 numpy copy (the spec must not alias the model's memory)."""
    return tensor.detach().float().cpu().numpy().copy()


def _metadata(
    source: Path, step: int | None, cfg: ModelConfig, quantization: str | None, search: TranslateConfig
) -> dict:
    """What a user of the export needs to translate as `mtkit translate` does (mtkit.json)."""
    return {
        "format": "mtkit-ctranslate2-export",
        "checkpoint": str(source),
        "step": step,
        "quantization": quantization or "float32",
        "model": dataclasses.asdict(cfg),
        "max_source_tokens": cfg.max_positions - 1,
        "search": {k: getattr(search, k) for k in ("beam", "length_penalty", "max_len_a", "max_len_b")},
        "translate": dataclasses.asdict(search),  # every setting, for `mtkit translate EXPORT --engine ctranslate2`
    }


def usage_readme(metadata: dict) -> str:
    """The README.md written into the export: translate with ctranslate2 + sentencepiece alone."""
    s, max_source, codes = metadata["search"], metadata["max_source_tokens"], metadata.get("language_codes")
    code = f'[">>{codes[0]}<<"] + ' if codes else ""  # a multilingual model: the target's code piece first
    into = (
        (
            f"\nThe model translates into {', '.join(codes)}: each source begins with the piece of its target's code "
            f"(`>>{codes[0]}<<` below), as `mtkit translate --target-lang {codes[0]}` puts it.\n"
        )
        if codes
        else ""
    )
    return f"""# CTranslate2 model exported by `mtkit export`

From `{metadata["checkpoint"]}`, weights {metadata["quantization"]}. Needs only
`pip install ctranslate2==4.8.5 sentencepiece` (no mtkit, no torch).
{into}
```python
import math
import ctranslate2, sentencepiece as spm

sp = spm.SentencePieceProcessor(model_file="spm.model")
translator = ctranslate2.Translator(".", device="cpu", compute_type="default")
lines = ["A man is sleeping.", "Two dogs play in the snow."]
pieces = [({code}sp.encode(line.strip(), out_type=str))[:{max_source}] for line in lines]
# mtkit's maximum output: floor(a * source pieces + b) pieces, then the end token.
longest = max(math.floor({s["max_len_a"]} * len(p) + {s["max_len_b"]}) for p in pieces)
results = translator.translate_batch(pieces, beam_size={s["beam"]}, length_penalty=0,
                                     max_decoding_length=min(longest, {max_source}) + 1, min_decoding_length=0)
for r in results:
    print(sp.decode(r.hypotheses[0]))
```

`length_penalty=0` ranks hypotheses by their summed log-probability. mtkit's own default is the GNMT
penalty with alpha {s["length_penalty"]}, which CTranslate2 does not implement; CTranslate2's default
(`length_penalty=1`) divides by the length instead. `mtkit.json` records the model's settings.
"""
