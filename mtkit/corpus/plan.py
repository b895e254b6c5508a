"""The splits of a preprocess run, planned before anything is written: each training corpus as its own split, valid
and test sets per language pair, the split names, the pieces (target-language token, corpus tag) each split's
sources start with, and a shard's share of them (`--shard K/N`). Opens and counts the text (mtkit.corpus.sources);
tokenizes and writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from mtkit.corpus.config import CorpusConfig, PreprocessConfig, corpus_configs
from mtkit.corpus.fuzzy_matches import FUZZY_PIECE, Matcher, fuzzy_source
from mtkit.corpus.sharding import shard_range
from mtkit.corpus.sources import Source, file_source, hf_source, load_hf_split, source_span
from mtkit.errors import UserError, check


def language_token(lang: str) -> str:
    """The target-language token that starts every source of a multilingual model: opus-mt's `>>de<<`."""
    return f">>{lang}<<"


@dataclass
class Split:
    """One split to write: its text, its direction, the corpus it cleans by (None: valid or test, never cleaned) and
    the pieces put before each of its sources (the language token, then the corpus tag)."""

    name: str
    source: Source
    langs: tuple[str, str]
    corpus: CorpusConfig | None
    prefix: tuple[str, ...]
    keep_digests: bool = False  # a shard's: its kept pairs' dedup digests written beside, for the join


@dataclass
class Plan:
    splits: list[Split]
    corpora: list[CorpusConfig]
    pairs: list[str]  # "src-tgt", in the corpora's order
    language_tokens: bool
    valid_splits: dict[str, str]  # pair -> split name

    def symbols(self) -> list[str]:
        """Every prefix piece once, language tokens first, then the fuzzy-match piece where a corpus has matches:
        sentencepiece's user-defined symbols."""
        pieces = [piece for split in self.splits for piece in split.prefix]
        fuzzy = [FUZZY_PIECE] if any(corpus.fuzzy_matches for corpus in self.corpora) else []
        return list(dict.fromkeys([*pieces, *fuzzy]))

    def train_splits(self) -> list[Split]:
        return [split for split in self.splits if split.corpus is not None]


def plan_splits(cfg: PreprocessConfig, chunk_pairs: int, matcher: Matcher | None = None) -> Plan:
    """Resolve, open and count every split; file, pair and line-count problems surface here. `matcher` finds the
    fuzzy matches of a corpus that asks for them (mtkit.corpus.fuzzy_matches).

    Without [[preprocess.corpora]] the names are today's (train, valid, each test prefix's basename); with
    several language pairs, train.<corpus>, valid.<src>-<tgt> and <test>.<src>-<tgt>."""
    corpora = corpus_configs(cfg)
    if cfg.corpora:  # pair -> (source, target), in the corpora's order
        langs_of = {corpus.pair: (corpus.source_lang, corpus.target_lang) for corpus in corpora}
    else:
        langs_of = {f"{cfg.source_lang}-{cfg.target_lang}": (cfg.source_lang, cfg.target_lang)}
    pairs, targets = list(langs_of), {target for _, target in langs_of.values()}
    tokens = cfg.language_tokens == "always" or (cfg.language_tokens == "auto" and len(targets) > 1)
    if cfg.corpora:
        splits = _corpus_splits(cfg, corpora, chunk_pairs, matcher)
    else:
        splits = _legacy_splits(cfg, corpora, chunk_pairs)
    several = len(pairs) > 1
    valid: dict[str, str] = {}
    for pair, prefix in _valid_prefixes(cfg.valid, pairs).items():
        valid[pair] = f"valid.{pair}" if several else "valid"
        splits.append(_split(valid[pair], prefix, langs_of[pair], cfg, chunk_pairs))
    for prefix in cfg.test:
        for pair in pairs:
            name = f"{Path(prefix).name}.{pair}" if several else Path(prefix).name
            splits.append(_split(name, prefix, langs_of[pair], cfg, chunk_pairs))
    if tokens:
        for split in splits:
            split.prefix = (language_token(split.langs[1]), *split.prefix)
    check(splits, "nothing to preprocess: give a train, valid or test prefix, or a Hugging Face dataset")
    names = [split.name for split in splits]
    repeated = sorted({name for name in names if names.count(name) > 1})
    check(not repeated, f"two splits would both be named {', '.join(repeated)}; rename one of the files")
    if not valid and "valid" in names:  # a Hugging Face corpus's validation split
        valid = dict.fromkeys(pairs, "valid")
    return Plan(splits, corpora, pairs, tokens, valid)


def _legacy_splits(cfg: PreprocessConfig, corpora: list[CorpusConfig], chunk_pairs: int) -> list[Split]:
    """The section's own train file and Hugging Face splits, as before corpora existed (valid and test files are
    added by the caller)."""
    langs = (cfg.source_lang, cfg.target_lang)
    corpus = corpora[0] if corpora else None
    splits = (
        [Split("train", file_source("train", cfg.train, langs, cfg.on_bad_utf8, True, chunk_pairs), langs, corpus, ())]
        if cfg.train
        else []
    )
    if cfg.hf_dataset:
        for name, hf_split in cfg.hf_splits.items():
            dataset = load_hf_split(cfg.hf_dataset, cfg.hf_config, hf_split, *langs, cache_dir=cfg.hf_cache_dir)
            clean = name == "train"
            splits.append(
                Split(name, hf_source(name, dataset, langs, clean, chunk_pairs), langs, corpus if clean else None, ())
            )
    return splits


def _corpus_splits(
    cfg: PreprocessConfig, corpora: list[CorpusConfig], chunk_pairs: int, matcher: Matcher | None
) -> list[Split]:
    """One split per corpus, train.<name>; a file or dataset problem names the corpus."""
    splits = []
    for corpus in corpora:
        name, langs = f"train.{corpus.name}", (corpus.source_lang, corpus.target_lang)
        try:
            if corpus.train:
                source = file_source(name, corpus.train, langs, cfg.on_bad_utf8, True, chunk_pairs)
            else:
                dataset = load_hf_split(
                    corpus.hf_dataset or "", corpus.hf_config, corpus.hf_split, *langs, cache_dir=cfg.hf_cache_dir
                )
                source = hf_source(name, dataset, langs, True, chunk_pairs)
        except UserError as exc:
            raise UserError(f"corpus {corpus.name}: {exc}") from None
        if corpus.fuzzy_matches:
            source = fuzzy_source(source, corpus.fuzzy_matches, chunk_pairs, matcher)
        splits.append(Split(name, source, langs, corpus, (corpus.tag,) if corpus.tag else ()))
    return splits


def _valid_prefixes(valid: str | dict[str, str] | None, pairs: list[str]) -> dict[str, str]:
    """pair -> valid prefix: one prefix is read for every pair; a table must name each pair, and only those."""
    if valid is None:
        return {}
    if isinstance(valid, str):
        return dict.fromkeys(pairs, valid)
    unknown = [pair for pair in valid if pair not in pairs]
    check(not unknown, f"valid: {', '.join(unknown)} is not a language pair of the corpora ({', '.join(pairs)})")
    missing = [pair for pair in pairs if pair not in valid]
    check(
        not missing,
        f"valid: no valid set for the language pair {', '.join(missing)}; give one prefix for every "
        "pair or a table that names each",
    )
    return {pair: valid[pair] for pair in pairs}


def _split(name: str, prefix: str, langs: tuple[str, str], cfg: PreprocessConfig, chunk_pairs: int) -> Split:
    """A valid or test split: read as is, one pair per line."""
    return Split(name, file_source(name, prefix, langs, cfg.on_bad_utf8, False, chunk_pairs), langs, None, ())


def shard_plan(plan: Plan, index: int, count: int, chunk_pairs: int) -> tuple[Plan, dict[str, list[int]]]:
    """Shard `index` of `count`'s share of `plan`: each training corpus's pairs in its shard_range (mtkit.corpus.
    sharding), each corpus sharded on its own; valid and test splits whole in shard 1 only (they are small and never
    cleaned: the join takes them from shard 1, no shard encodes them twice). Also each training split's [start, end,
    total]."""
    splits, lines = [], {}
    for split in plan.splits:
        if split.corpus is None:
            if index == 1:
                splits.append(split)
            continue
        total = split.source.count
        start, end = shard_range(total, index, count, chunk_pairs)
        lines[split.name] = [start, end, total]
        splits.append(replace(split, source=source_span(split.source, start, end), keep_digests=True))
    return replace(plan, splits=splits), lines
