"""`mtkit preprocess`: parallel text cleaned, a joint BPE vocabulary learnt and everything binarized into DATA_DIR
(mtkit.corpus.preprocess), a shard of it with --shard, or a complete set of shards joined with --join; registered on
the app by mtkit.cli.main. The manifest's summary on stdout (JSON with --json).
"""

from __future__ import annotations

import os
from pathlib import Path

import typer

from mtkit.cli.command import emit, user_errors
from mtkit.cli.options import given_option, option
from mtkit.corpus.config import CleaningConfig, PreprocessConfig
from mtkit.errors import check


@user_errors
def preprocess(
    ctx: typer.Context,
    config: Path | None = typer.Option(
        None,
        "--config",
        "-c",
        help="Recipe TOML whose preprocess section gives the settings; options given here override it.",
    ),
    source_lang: str | None = given_option(PreprocessConfig, "source_lang", "--source-lang", "-s"),
    target_lang: str | None = given_option(PreprocessConfig, "target_lang", "--target-lang", "-t"),
    out: Path = typer.Option(..., "--out", "-o", help="Output DATA_DIR (written atomically)."),
    train: str | None = given_option(PreprocessConfig, "train"),
    valid: str | None = given_option(PreprocessConfig, "valid"),
    test: list[str] = given_option(PreprocessConfig, "test", default=[]),
    vocab_size: int = option(PreprocessConfig, "vocab_size"),
    workers: int = option(PreprocessConfig, "workers", "-j"),
    spm_model: Path | None = given_option(PreprocessConfig, "spm_model"),
    max_len: int = option(CleaningConfig, "max_len"),
    max_ratio: float = option(CleaningConfig, "max_ratio"),
    dedup: bool = option(CleaningConfig, "dedup", negatable=True),
    filter_same: bool = option(CleaningConfig, "filter_same", negatable=True),
    filter_scripts: bool = option(CleaningConfig, "filter_scripts", negatable=True),
    filter_langid: bool = option(CleaningConfig, "filter_langid", negatable=True),
    character_coverage: float = option(PreprocessConfig, "character_coverage"),
    input_sentence_size: int = option(PreprocessConfig, "input_sentence_size"),
    on_bad_utf8: str = option(PreprocessConfig, "on_bad_utf8"),
    hf_dataset: str | None = given_option(PreprocessConfig, "hf_dataset"),
    hf_config: str | None = given_option(PreprocessConfig, "hf_config"),
    hf_cache_dir: str | None = given_option(PreprocessConfig, "hf_cache_dir"),
    shard: str | None = typer.Option(
        None,
        "--shard",
        metavar="K/N",
        help="Binarize shard K of N of every training corpus (needs --spm-model) into DATA_DIR.shard-K-of-N; "
        "`--join` then writes DATA_DIR (docs/preprocessing-and-data.md). Default: from torchrun's RANK/WORLD_SIZE or "
        "a Slurm job array's SLURM_ARRAY_TASK_ID; 1/1: the whole corpus here.",
    ),
    join: bool = typer.Option(
        False, "--join", help="Join the complete set DATA_DIR.shard-K-of-N into DATA_DIR, as one run writes it."
    ),
    keep_shards: bool = typer.Option(
        False, "--keep-shards", help="With --join: keep the shards' directories (by default removed once joined)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the manifest as JSON."),
) -> None:
    """Clean, learn a joint BPE vocabulary, and binarize parallel text into DATA_DIR."""
    from mtkit.bulk.shards import resolve_shard
    from mtkit.corpus.preprocess import preprocess as run_preprocess
    from mtkit.corpus.sharding import shard_path as shard_directory
    from mtkit.corpus.shards import join_shards
    from mtkit.recipe import resolve_preprocess, resolve_term_hints

    # Only options typed on the command line override the recipe; the others keep its values (or the defaults).
    # By name: typer bundles its own copy of click, whose ParameterSource is not click's.
    given = {
        name: value
        for name, value in ctx.params.items()
        if name not in ("config", "out", "as_json", "shard", "join", "keep_shards")
        and ctx.get_parameter_source(name).name == "COMMANDLINE"
    }
    check(join or not keep_shards, "--keep-shards: only with --join")
    spec = None
    if join:
        check(
            config is None and shard is None and not given,
            "--join takes only --out, --keep-shards and --json: the settings are the shards' own",
        )
        manifest = join_shards(out, keep_shards)
    else:
        if given.get("spm_model") is not None:
            given["spm_model"] = str(given["spm_model"])
        cfg = resolve_preprocess(config, given)
        spec = resolve_shard(shard, os.environ)
        check(
            spec is None or cfg.spm_model is not None,
            f"{spec and spec.origin}: sharded preprocessing needs --spm-model (or spm_model in the recipe), one "
            "vocabulary for every shard; --shard 1/1 preprocesses the whole corpus here",
        )
        hints = resolve_term_hints(config).enabled  # the recipe trains with term hints: pieces and alignments
        from mtkit.memory.fuzzy_repair import matched_pairs  # a corpus's fuzzy matches, by the memory's index

        manifest = run_preprocess(
            cfg, out, (spec.index, spec.count) if spec is not None else None, hints, matched_pairs
        )
    name = shard_directory(out, spec.index, spec.count) if spec is not None else out
    lines = [f"{name}: vocab {manifest['vocab_size']}"]
    for split_name, split in manifest["splits"].items():
        dropped = ", ".join(f"{k} {v}" for k, v in split.get("dropped", {}).items() if v) or "none dropped"
        lines.append(f"  {split_name}: {split['pairs']} pairs ({dropped})")
    if spec is not None:
        lines.append(
            f"shard {spec.index}/{spec.count} done; once all are, join them: mtkit preprocess --join --out {out}"
        )
    emit(manifest, as_json, "\n".join(lines))
