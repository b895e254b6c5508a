"""Hugging Face `transformers` Marian models (MarianMTModel + MarianTokenizer, the opus-mt family) to and from mtkit.

Export writes a run's model as a directory `MarianMTModel.from_pretrained` and `MarianTokenizer.from_pretrained`
load; import turns such a directory into an mtkit run directory. transformers is an optional extra, imported only
when one of them runs. No training code here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from mtkit.checkpoint import CHECKPOINT_DIR, WEIGHTS_KIND, save_checkpoint, step_path
from mtkit.errors import UserError, check
from mtkit.export import read_for_export
from mtkit.files import atomic_directory
from mtkit.interop import METADATA_NAME
from mtkit.model import ModelConfig, Transformer
from mtkit.search import TranslateConfig
from mtkit.tokenizer import TableTokenizer
from mtkit.train import TrainConfig

INSTALL_HINT = "transformers is not installed: pip install -e '.[hf]'"
LAYER_NORM_EPSILON = 1e-5  # Marian's and torch.nn.LayerNorm's default, which every mtkit LayerNorm uses
ACTIVATIONS = {"relu": "relu", "swish": "swish"}  # mtkit's name -> transformers' activation_function
IMPORTED_ACTIVATIONS = {"relu": "relu", "swish": "swish", "silu": "swish"}  # transformers' -> mtkit's
SHARES = {  # mtkit share_embeddings -> (share_encoder_decoder_embeddings, tie_word_embeddings)
    "all": (True, True), "decoder": (False, True), "none": (False, False),
}
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
    for name, parts in (fused or []):
        rows += [(f"{mtkit}.{name}.weight", [f"{hf}.{p}_proj.weight" for p in parts], "cols"),
                 (f"{mtkit}.{name}.bias", [f"{hf}.{p}_proj.bias" for p in parts], "none")]
    return rows + [(f"{mtkit}.out.weight", [f"{hf}.out_proj.weight"], "rows"),
                   (f"{mtkit}.out.bias", [f"{hf}.out_proj.bias"], "rows")]


def _feed_forward(mtkit: str, hf: str) -> list[tuple[str, list[str], str]]:
    return [(f"{mtkit}.inner.weight", [f"{hf}.fc1.weight"], "cols"), (f"{mtkit}.inner.bias", [f"{hf}.fc1.bias"], "none"),
            (f"{mtkit}.outer.weight", [f"{hf}.fc2.weight"], "rows"), (f"{mtkit}.outer.bias", [f"{hf}.fc2.bias"], "rows")]


def _norm(mtkit: str, hf: str) -> list[tuple[str, list[str], str]]:
    return [(f"{mtkit}.weight", [f"{hf}.weight"], "vector"), (f"{mtkit}.bias", [f"{hf}.bias"], "vector")]


def tensor_map(cfg: ModelConfig) -> list[tuple[str, list[str], str]]:
    """(mtkit name, Marian names stacked by rows, kind) for every mtkit tensor (tied ones once)."""
    shared_src, tied = SHARES[cfg.share_embeddings]
    rows = [("encoder.embed.tokens.weight", ["model.shared.weight" if shared_src else "model.encoder.embed_tokens.weight"], "cols")]
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
    out["final_logits_bias"] = (bias.detach().float().cpu() if bias is not None else torch.zeros(cfg.target_vocab_size))[None].clone()
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
    check(cfg.norm == "post", f"{where}: model option norm={cfg.norm!r} has no MarianMTModel equivalent (post-norm only)")
    check(cfg.positions == "sinusoidal",
          f"{where}: model option positions={cfg.positions!r} has no MarianMTModel equivalent (sinusoidal only)")
    check(cfg.d_model % 2 == 0, f"{where}: model option d_model={cfg.d_model} is odd; Marian's position table needs it even")


def marian_config(transformers: Any, cfg: ModelConfig) -> Any:
    """The MarianConfig of an mtkit model (post-norm, sinusoidal, scaled embeddings)."""
    shared_src, tied = SHARES[cfg.share_embeddings]
    return transformers.MarianConfig(
        vocab_size=cfg.vocab_size, decoder_vocab_size=cfg.target_vocab_size, max_position_embeddings=cfg.max_positions,
        d_model=cfg.d_model, encoder_layers=cfg.encoder_layers, decoder_layers=cfg.decoder_layers,
        encoder_attention_heads=cfg.n_heads, decoder_attention_heads=cfg.n_heads,
        encoder_ffn_dim=cfg.d_ff, decoder_ffn_dim=cfg.d_ff, activation_function=ACTIVATIONS[cfg.activation],
        dropout=cfg.dropout, attention_dropout=cfg.attention_dropout, activation_dropout=cfg.activation_dropout,
        scale_embedding=True, pad_token_id=cfg.pad_id, eos_token_id=cfg.eos_id, forced_eos_token_id=cfg.eos_id,
        bos_token_id=None if cfg.bos_id == cfg.pad_id else cfg.bos_id, decoder_start_token_id=cfg.start_id,
        share_encoder_decoder_embeddings=shared_src, tie_word_embeddings=tied,
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
    for field, other in (("encoder_attention_heads", "decoder_attention_heads"), ("encoder_ffn_dim", "decoder_ffn_dim")):
        if getattr(config, field) != getattr(config, other):
            raise refuse(other, f"differs from {field}; mtkit uses one value for both stacks")
    for field in ("encoder_layerdrop", "decoder_layerdrop"):
        if getattr(config, field, 0.0):
            raise refuse(field, "has no mtkit equivalent")
    shares = (bool(config.share_encoder_decoder_embeddings), bool(config.tie_word_embeddings))
    if shares not in SHARES.values():
        raise refuse("tie_word_embeddings", "with shared encoder/decoder embeddings but an untied output has no mtkit equivalent")
    target_size = config.decoder_vocab_size or config.vocab_size
    bos = config.bos_token_id if config.bos_token_id is not None else config.pad_token_id
    start = None if config.decoder_start_token_id == bos else config.decoder_start_token_id  # None: bos, mtkit's default
    try:
        return ModelConfig(
            vocab_size=config.vocab_size, d_model=config.d_model, n_heads=config.encoder_attention_heads,
            d_ff=config.encoder_ffn_dim, encoder_layers=config.encoder_layers, decoder_layers=config.decoder_layers,
            dropout=float(config.dropout), attention_dropout=float(config.attention_dropout),
            activation_dropout=float(config.activation_dropout), max_positions=config.max_position_embeddings,
            share_embeddings=next(k for k, v in SHARES.items() if v == shares), pad_id=config.pad_token_id,
            bos_id=bos,
            eos_id=_single(config.eos_token_id), activation=IMPORTED_ACTIVATIONS[config.activation_function],
            output_bias=bias_nonzero, decoder_start_id=start,
            tgt_vocab_size=None if target_size == config.vocab_size else target_size,
        )
    except (TypeError, ValueError) as exc:
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


def export_huggingface(path: str | Path, out: str | Path, score_json: str | Path | None = None) -> dict[str, Any]:
    """Write RUN_DIR's model (or a checkpoint's) as a MarianMTModel + MarianTokenizer directory, atomically.

    `score_json`: the output of `mtkit score --json`, quoted in the model card with its sacreBLEU signature.
    """
    transformers = import_transformers()
    read = read_for_export(path, out, lambda options, where: check_exportable(ModelConfig(**options), where))
    source, model, tokenizer, configs, manifest, out = \
        read.checkpoint, read.model, read.tokenizer, read.configs, read.manifest, Path(out)
    hf = build_marian(transformers, model)
    search = TranslateConfig(**configs.get("translate", {}))
    hf.generation_config = generation_config(transformers, model.cfg, search)
    score = json.loads(Path(score_json).read_text(encoding="utf-8")) if score_json else None
    card = model_card(source, configs, manifest, score, _valid_bleu(source))
    with atomic_directory(out) as tmp:
        tmp.chmod(0o755)  # a model directory others may load (mkdtemp made it private)
        hf.save_pretrained(str(tmp))
        save_marian_tokenizer(transformers, tokenizer, model.cfg, manifest, tmp)
        (tmp / "README.md").write_text(card, encoding="utf-8")
        (tmp / METADATA_NAME).write_text(json.dumps({"format": "mtkit-huggingface-export", "checkpoint": str(source),
                                                     "configs": configs}, indent=2) + "\n", encoding="utf-8")
    files = sorted(p.name for p in out.iterdir())
    return {"out": str(out), "checkpoint": str(source), "transformers": transformers.__version__, "files": files,
            "bytes": sum(p.stat().st_size for p in out.iterdir() if p.is_file())}


def generation_config(transformers: Any, cfg: ModelConfig, search: TranslateConfig) -> Any:
    """What `generate` needs to search as mtkit does, as far as it can: beam size, never pad or bos, eos at the end.

    generate divides a beam's log-probability by length**length_penalty and has no GNMT penalty; at 0 both rank
    by the summed log-probability, and beam search then follows mtkit's rules unless a sentence reaches the maximum
    length (generate's is one fixed length, mtkit's a * source length + b).
    """
    bad = sorted({cfg.pad_id, cfg.bos_id})
    return transformers.GenerationConfig(
        num_beams=search.beam, max_length=cfg.max_positions, length_penalty=0.0, early_stopping=True,
        decoder_start_token_id=cfg.start_id, eos_token_id=cfg.eos_id, forced_eos_token_id=cfg.eos_id,
        pad_token_id=cfg.pad_id, bad_words_ids=[[i] for i in bad],
    )


def save_marian_tokenizer(transformers: Any, tokenizer: Any, cfg: ModelConfig, manifest: dict, out: Path) -> None:
    """source.spm, target.spm, vocab.json (+ target_vocab.json) and tokenizer_config.json, by MarianTokenizer."""
    source, target = tokenizer.models if isinstance(tokenizer, TableTokenizer) else (tokenizer.to_bytes(),) * 2
    pieces, target_pieces = tokenizer.pieces(), tokenizer.target_pieces()
    separate = pieces != target_pieces
    work = out / ".tokenizer"
    work.mkdir()
    (work / "source.spm").write_bytes(source)
    (work / "target.spm").write_bytes(target)
    (work / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(pieces)}, ensure_ascii=False), encoding="utf-8")
    (work / "target_vocab.json").write_text(json.dumps({p: i for i, p in enumerate(target_pieces)}, ensure_ascii=False),
                                            encoding="utf-8")
    marian = transformers.MarianTokenizer(
        str(work / "source.spm"), str(work / "target.spm"), str(work / "vocab.json"),
        target_vocab_file=str(work / "target_vocab.json") if separate else None,
        source_lang=manifest.get("source_lang"), target_lang=manifest.get("target_lang"),
        unk_token=pieces[tokenizer.unk_id], eos_token=pieces[cfg.eos_id], pad_token=pieces[cfg.pad_id],
        model_max_length=cfg.max_positions, separate_vocabs=separate,
    )
    marian.save_pretrained(str(out))
    shutil.rmtree(work)


def _valid_bleu(source: Path) -> dict | None:
    """The last validation BLEU in the run's metrics.jsonl (train.valid_bleu), if any."""
    run_dir = source.parent.parent if source.parent.name == CHECKPOINT_DIR else source.parent  # step_N.pt, average.pt
    metrics = run_dir / "metrics.jsonl"
    found = None
    if metrics.is_file():
        for line in metrics.read_text(encoding="utf-8").splitlines():
            record = json.loads(line) if line.strip().startswith("{") else {}
            if "valid_bleu" in record:
                found = record
    return found


def model_card(source: Path, configs: dict, manifest: dict, score: dict | None, valid: dict | None) -> str:
    """README.md of the export: languages, recipe, data, BLEU as mtkit measured it, and how to load the model."""
    src, tgt = manifest.get("source_lang", "?"), manifest.get("target_lang", "?")
    splits = ", ".join(f"{name} {split.get('pairs')} pairs" for name, split in manifest.get("splits", {}).items())
    if score is not None:
        bleu = f"BLEU {score.get('bleu')} (sacreBLEU signature `{score.get('signature')}`), chrF2 {score.get('chrf')}"
    elif valid is not None:
        bleu = f"validation BLEU {valid['valid_bleu']:.2f} at step {valid.get('step')} (sacreBLEU defaults, 13a)"
    else:
        bleu = "not measured"
    model = configs.get("model", {})
    return f"""---
language: [{src}, {tgt}]
library_name: transformers
pipeline_tag: translation
tags: [translation, marian, mtkit]
---
# {src}-{tgt} translation model trained with mtkit

A Transformer ({model.get('d_model')} wide, {model.get('encoder_layers')}+{model.get('decoder_layers')} layers, \
{model.get('vocab_size')} pieces) exported by `mtkit export --to huggingface` from `{source}`.

- Languages: {src} -> {tgt}
- Data: {splits or 'not recorded'}
- Result: {bleu}
- Recipe: `mtkit.json` holds the model, training and search settings.

```python
from transformers import MarianMTModel, MarianTokenizer

tokenizer = MarianTokenizer.from_pretrained(".")
model = MarianMTModel.from_pretrained(".")
batch = tokenizer(["A man is sleeping."], return_tensors="pt", padding=True)
print(tokenizer.batch_decode(model.generate(**batch), skip_special_tokens=True))
```

`generation_config.json` searches with mtkit's beam size and `length_penalty=0` (summed log-probability).
mtkit's own default is the GNMT penalty (alpha {configs.get('translate', {}).get('length_penalty')}), which
`generate` does not implement, and mtkit caps each output at a * source length + b pieces where `generate` has one
`max_length`: translations can differ from `mtkit translate` where those matter.
"""


def import_huggingface(path: str | Path, out: str | Path) -> dict[str, Any]:
    """A local MarianMTModel directory (a downloaded opus-mt model) as an mtkit run directory, written atomically:
    config.json and recipe.toml (the model's settings, for `train -c ... --init-from`), spm.model (its tokenizer,
    for `preprocess --spm-model`) and the weights as the step 0 checkpoint."""
    transformers = import_transformers()
    path, out = Path(path), Path(out)
    check(not out.exists() or (out.is_dir() and not any(out.iterdir())), f"{out}: exists and is not empty; choose another --out")
    hf, cfg = load_marian(transformers, path)
    tokenizer = read_marian_tokenizer(path, cfg)
    model = Transformer(cfg)
    model.load_state_dict(from_marian_state(hf.state_dict(), cfg))
    del hf
    tokenizer_config = _json(path / "tokenizer_config.json")
    langs = tokenizer_config.get("source_lang"), tokenizer_config.get("target_lang")
    search = TranslateConfig(beam=int(getattr(transformers.GenerationConfig.from_model_config(_config(transformers, path)),
                                              "num_beams", 4) or 4))
    recipe = {"preprocess": {}, "model": dataclasses.asdict(cfg), "train": dataclasses.asdict(TrainConfig()),
              "translate": dataclasses.asdict(search)}
    spm_model = tokenizer.to_bytes()
    manifest = {"source_lang": langs[0], "target_lang": langs[1], "vocab_size": cfg.vocab_size,
                "spm_sha256": hashlib.sha256(spm_model).hexdigest(), "imported_from": str(path)}
    payload = {"kind": WEIGHTS_KIND, "model": model.state_dict(), "step": 0, "configs": recipe,
               "spm_model": spm_model, "spm_sha256": manifest["spm_sha256"], "manifest": manifest}
    with atomic_directory(out) as tmp:
        tmp.chmod(0o755)
        (tmp / "spm.model").write_bytes(spm_model)
        (tmp / "config.json").write_text(json.dumps(recipe, indent=2) + "\n", encoding="utf-8")
        (tmp / "recipe.toml").write_text(recipe_toml(recipe), encoding="utf-8")
        (tmp / CHECKPOINT_DIR).mkdir()
        save_checkpoint(step_path(tmp, 0), payload)
    return {"out": str(out), "source": str(path), "model": dataclasses.asdict(cfg), "languages": list(langs)}


def _json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def _config(transformers: Any, path: Path) -> Any:
    return transformers.AutoConfig.from_pretrained(str(path), local_files_only=True)


def read_marian_tokenizer(path: Path, cfg: ModelConfig) -> TableTokenizer:
    """The TableTokenizer of a Marian directory; its vocabulary and special ids must be the model's."""
    for name in ("source.spm", "target.spm"):
        check((path / name).is_file(), f"{path / name}: no such file (a MarianTokenizer needs it)")
    separate = bool(_json(path / "tokenizer_config.json").get("separate_vocabs"))
    source_vocab = read_vocab(path / "vocab.json")
    target_vocab = read_vocab(path / "target_vocab.json") if separate else None
    tokenizer = TableTokenizer((path / "source.spm").read_bytes(), (path / "target.spm").read_bytes(), source_vocab,
                               target_vocab, name=str(path))
    sizes = (tokenizer.vocab_size, tokenizer.target_vocab_size)
    check(sizes == (cfg.vocab_size, cfg.target_vocab_size),
          f"{path}: config field vocab_size={cfg.vocab_size} (decoder {cfg.target_vocab_size}) but vocab.json has {sizes}")
    for field, mine, theirs in (("pad_token_id", cfg.pad_id, tokenizer.pad_id), ("eos_token_id", cfg.eos_id, tokenizer.eos_id)):
        check(mine == theirs, f"{path}: config field {field}={mine} but vocab.json gives that token id {theirs}")
    return tokenizer


def recipe_toml(recipe: dict) -> str:
    """The recipe's sections as TOML (`mtkit train -c`); None values are left out (TOML has no null)."""
    lines = ["# Written by `mtkit import`: the imported model's settings. Fine-tune with", "#   mtkit train DATA_DIR "
             "--save-dir NEW_RUN -c THIS_FILE --init-from THIS_RUN", ""]
    for section in ("model", "translate"):
        lines.append(f"[{section}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in recipe[section].items() if value is not None]
        lines.append("")
    return "\n".join(lines) + "\n"
