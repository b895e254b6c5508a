"""Hugging Face `transformers` Marian models (MarianMTModel + MarianTokenizer, the opus-mt family) to and from mtkit.

Export writes a run's model as a directory `MarianMTModel.from_pretrained` and `MarianTokenizer.from_pretrained`
load; import turns such a directory into an mtkit run directory. The mapping itself is mtkit.exports.marian's. No
training code here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from mtkit.corpus.language_pairs import language_pairs
from mtkit.errors import check
from mtkit.exports.marian import (
    build_marian,
    check_exportable,
    from_marian_state,
    import_transformers,
    load_marian,
    read_vocab,
)
from mtkit.exports.source import read_for_export
from mtkit.file_names import (
    CHECKPOINT_DIR,
    CONFIG_NAME,
    METADATA_NAME,
    METRICS_NAME,
    README_NAME,
    RECIPE_NAME,
    SPM_NAME,
)
from mtkit.files import atomic_directory
from mtkit.model.transformer import ModelConfig, Transformer
from mtkit.runs.checkpoint import WEIGHTS_KIND, save_checkpoint, step_path
from mtkit.runs.checkpoint_files import run_directory
from mtkit.search.config import TranslateConfig
from mtkit.tokenizer import TableTokenizer


def export_huggingface(path: str | Path, out: str | Path, score_json: str | Path | None = None) -> dict[str, Any]:
    """Write RUN_DIR's model (or a checkpoint's) as a MarianMTModel + MarianTokenizer directory, atomically.

    `score_json`: the output of `mtkit score --json`, quoted in the model card with its sacreBLEU signature.
    """
    transformers = import_transformers()
    read = read_for_export(path, out, lambda options, where: check_exportable(ModelConfig(**options), where))
    source, model, tokenizer, configs, manifest, out = (
        read.checkpoint,
        read.model,
        read.tokenizer,
        read.configs,
        read.manifest,
        Path(out),
    )
    hf = build_marian(transformers, model)
    search = TranslateConfig(**configs.get("translate", {}))
    hf.generation_config = generation_config(transformers, model.cfg, search)
    score = json.loads(Path(score_json).read_text(encoding="utf-8")) if score_json else None
    card = model_card(
        source,
        configs,
        manifest,
        score,
        _valid_bleu(source),
        tokenizer.language_codes(),
        language_pairs(tokenizer, manifest),
    )
    with atomic_directory(out) as tmp:
        tmp.chmod(0o755)  # a model directory others may load (mkdtemp made it private)
        hf.save_pretrained(str(tmp))
        save_marian_tokenizer(transformers, tokenizer, model.cfg, manifest, tmp)
        (tmp / README_NAME).write_text(card, encoding="utf-8")
        (tmp / METADATA_NAME).write_text(
            json.dumps({"format": "mtkit-huggingface-export", "checkpoint": str(source), "configs": configs}, indent=2)
            + "\n",
            encoding="utf-8",
        )
    files = sorted(p.name for p in out.iterdir())
    return {
        "out": str(out),
        "checkpoint": str(source),
        "transformers": transformers.__version__,
        "files": files,
        "bytes": sum(p.stat().st_size for p in out.iterdir() if p.is_file()),
    }


def generation_config(transformers: Any, cfg: ModelConfig, search: TranslateConfig) -> Any:
    """What `generate` needs to search as mtkit does, as far as it can: beam size, never pad or bos, eos at the end.

    generate divides a beam's log-probability by length**length_penalty and has no GNMT penalty; at 0 both rank
    by the summed log-probability, and beam search then follows mtkit's rules unless a sentence reaches the maximum
    length (generate's is one fixed length, mtkit's a * source length + b).
    """
    bad = sorted({cfg.pad_id, cfg.bos_id})
    return transformers.GenerationConfig(
        num_beams=search.beam,
        max_length=cfg.max_positions,
        length_penalty=0.0,
        early_stopping=True,
        decoder_start_token_id=cfg.start_id,
        eos_token_id=cfg.eos_id,
        forced_eos_token_id=cfg.eos_id,
        pad_token_id=cfg.pad_id,
        bad_words_ids=[[i] for i in bad],
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
    (work / "vocab.json").write_text(
        json.dumps({p: i for i, p in enumerate(pieces)}, ensure_ascii=False), encoding="utf-8"
    )
    (work / "target_vocab.json").write_text(
        json.dumps({p: i for i, p in enumerate(target_pieces)}, ensure_ascii=False), encoding="utf-8"
    )
    marian = transformers.MarianTokenizer(
        str(work / "source.spm"),
        str(work / "target.spm"),
        str(work / "vocab.json"),
        target_vocab_file=str(work / "target_vocab.json") if separate else None,
        source_lang=manifest.get("source_lang"),
        target_lang=manifest.get("target_lang"),
        unk_token=pieces[tokenizer.unk_id],
        eos_token=pieces[cfg.eos_id],
        pad_token=pieces[cfg.pad_id],
        model_max_length=cfg.max_positions,
        separate_vocabs=separate,
    )
    # MarianTokenizer splits a leading >>fr<< off and hands sentencepiece the rest, space included, which mtkit's
    # whitespace-keeping models encode as one more piece; as added tokens that strip the space after them, the codes
    # give the ids `mtkit translate --target-lang fr` gives (each keeps its id: it is in the vocabulary already).
    marian.add_tokens(
        [
            transformers.AddedToken(f">>{code}<<", rstrip=True, normalized=False, special=False)
            for code in tokenizer.language_codes()
        ]
    )
    marian.save_pretrained(str(out))
    shutil.rmtree(work)


def _valid_bleu(source: Path) -> dict | None:
    """The last validation BLEU in the run's metrics.jsonl (train.valid_bleu), if any."""
    run_dir = run_directory(source)
    metrics = run_dir / METRICS_NAME
    found = None
    if metrics.is_file():
        for line in metrics.read_text(encoding="utf-8").splitlines():
            record = json.loads(line) if line.strip().startswith("{") else {}
            if "valid_bleu" in record:
                found = record
    return found


def model_card(
    source: Path,
    configs: dict,
    manifest: dict,
    score: dict | None,
    valid: dict | None,
    codes: list[str] | None = None,
    pairs: list[tuple[str, str]] | None = None,
) -> str:
    """README.md of the export: languages, recipe, data, BLEU as mtkit measured it, and how to load the model;
    `codes`: the target-language codes of a multilingual model, which each source then begins with; `pairs`: every
    (source, target) it translates (mtkit.corpus.language_pairs)."""
    pairs = pairs or []
    sources = sorted({source for source, _ in pairs}) or [manifest.get("source_lang", "?")]
    src, tgt = ", ".join(sources), ", ".join(codes or []) or manifest.get("target_lang", "?")
    languages = ", ".join(dict.fromkeys([*sources, *(codes or [manifest.get("target_lang", "?")])]))
    example = f">>{codes[0]}<< A man is sleeping." if codes else "A man is sleeping."
    begin = (
        (
            f"\nEach source begins with the code of the language to translate into, as opus-mt's multilingual models "
            f"do: {', '.join(f'`>>{code}<<`' for code in codes)}.\n"
        )
        if codes
        else ""
    )
    splits = ", ".join(f"{name} {split.get('pairs')} pairs" for name, split in manifest.get("splits", {}).items())
    if score is not None:
        bleu = f"BLEU {score.get('bleu')} (sacreBLEU signature `{score.get('signature')}`), chrF2 {score.get('chrf')}"
    elif valid is not None:
        bleu = f"validation BLEU {valid['valid_bleu']:.2f} at step {valid.get('step')} (sacreBLEU defaults, 13a)"
    else:
        bleu = "not measured"
    model = configs.get("model", {})
    directions = f" (directions: {', '.join(f'{a}-{b}' for a, b in pairs)})" if len(pairs) > 1 else ""
    return f"""---
language: [{languages}]
library_name: transformers
pipeline_tag: translation
tags: [translation, marian, mtkit]
---
# {src}{" -> " if codes else "-"}{tgt} translation model trained with mtkit

A Transformer ({model.get("d_model")} wide, {model.get("encoder_layers")}+{model.get("decoder_layers")} layers, \
{model.get("vocab_size")} pieces) exported by `mtkit export --to huggingface` from `{source}`.

- Languages: {src} -> {tgt}{directions}
- Data: {splits or "not recorded"}
- Result: {bleu}
- Recipe: `mtkit.json` holds the model, training and search settings.
{begin}
```python
from transformers import MarianMTModel, MarianTokenizer

tokenizer = MarianTokenizer.from_pretrained(".")
model = MarianMTModel.from_pretrained(".")
batch = tokenizer(["{example}"], return_tensors="pt", padding=True)
print(tokenizer.batch_decode(model.generate(**batch), skip_special_tokens=True))
```

`generation_config.json` searches with mtkit's beam size and `length_penalty=0` (summed log-probability).
mtkit's own default is the GNMT penalty (alpha {configs.get("translate", {}).get("length_penalty")}), which
`generate` does not implement, and mtkit caps each output at a * source length + b pieces where `generate` has one
`max_length`: translations can differ from `mtkit translate` where those matter.
"""


def import_huggingface(path: str | Path, out: str | Path, train: dict[str, Any]) -> dict[str, Any]:
    """A local MarianMTModel directory (a downloaded opus-mt model) as an mtkit run directory, written atomically:
    config.json and recipe.toml (the model's settings, for `train -c ... --init-from`), spm.model (its tokenizer,
    for `preprocess --spm-model`) and the weights as the step 0 checkpoint. `train`: the recipe's [train] section
    the run carries, as data (`mtkit import` gives TrainConfig's defaults), so that exports stay below training."""
    transformers = import_transformers()
    path, out = Path(path), Path(out)
    check(
        not out.exists() or (out.is_dir() and not any(out.iterdir())),
        f"{out}: exists and is not empty; choose another --out",
    )
    hf, cfg = load_marian(transformers, path)
    tokenizer = read_marian_tokenizer(path, cfg)
    model = Transformer(cfg)
    model.load_state_dict(from_marian_state(hf.state_dict(), cfg))
    del hf
    tokenizer_config = _json(path / "tokenizer_config.json")
    langs = tokenizer_config.get("source_lang"), tokenizer_config.get("target_lang")
    search = TranslateConfig(
        beam=int(
            getattr(transformers.GenerationConfig.from_model_config(_config(transformers, path)), "num_beams", 4) or 4
        )
    )
    recipe = {
        "preprocess": {},
        "model": dataclasses.asdict(cfg),
        "train": dict(train),
        "translate": dataclasses.asdict(search),
    }
    spm_model = tokenizer.to_bytes()
    manifest = {
        "source_lang": langs[0],
        "target_lang": langs[1],
        "vocab_size": cfg.vocab_size,
        "spm_sha256": hashlib.sha256(spm_model).hexdigest(),
        "imported_from": str(path),
    }
    payload = {
        "kind": WEIGHTS_KIND,
        "model": model.state_dict(),
        "step": 0,
        "configs": recipe,
        "spm_model": spm_model,
        "spm_sha256": manifest["spm_sha256"],
        "manifest": manifest,
    }
    with atomic_directory(out) as tmp:
        tmp.chmod(0o755)
        (tmp / SPM_NAME).write_bytes(spm_model)
        (tmp / CONFIG_NAME).write_text(json.dumps(recipe, indent=2) + "\n", encoding="utf-8")
        (tmp / RECIPE_NAME).write_text(recipe_toml(recipe), encoding="utf-8")
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
    tokenizer = TableTokenizer(
        (path / "source.spm").read_bytes(),
        (path / "target.spm").read_bytes(),
        source_vocab,
        target_vocab,
        name=str(path),
    )
    sizes = (tokenizer.vocab_size, tokenizer.target_vocab_size)
    check(
        sizes == (cfg.vocab_size, cfg.target_vocab_size),
        f"{path}: config field vocab_size={cfg.vocab_size} (decoder {cfg.target_vocab_size}) "
        f"but vocab.json has {sizes}",
    )
    for field, mine, theirs in (
        ("pad_token_id", cfg.pad_id, tokenizer.pad_id),
        ("eos_token_id", cfg.eos_id, tokenizer.eos_id),
    ):
        check(mine == theirs, f"{path}: config field {field}={mine} but vocab.json gives that token id {theirs}")
    return tokenizer


def recipe_toml(recipe: dict) -> str:
    """The recipe's sections as TOML (`mtkit train -c`); None values are left out (TOML has no null)."""
    lines = [
        "# Written by `mtkit import`: the imported model's settings. Fine-tune with",
        "#   mtkit train DATA_DIR --save-dir NEW_RUN -c THIS_FILE --init-from THIS_RUN",
        "",
    ]
    for section in ("model", "translate"):
        lines.append(f"[{section}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in recipe[section].items() if value is not None]
        lines.append("")
    return "\n".join(lines) + "\n"
