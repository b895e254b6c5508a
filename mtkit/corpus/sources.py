"""Raw parallel text as re-readable chunks of (source lines, target lines): plain or gzipped file pairs, translation
files (TMX, PO/MO, XLIFF: mtkit.corpus.translation_files) and Hugging Face datasets with a `translation` column,
each counted and checked before anything is written. Reads only: no tokenizing, cleaning or writing
(mtkit.corpus.preprocess does those).
"""

from __future__ import annotations

import functools
import glob
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from mtkit.console import log
from mtkit.corpus.translation_files import PairCounts, is_translation_files, read_pairs, translation_files
from mtkit.errors import UserError, check
from mtkit.files import count_lines, decode_line, open_binary, resolve_prefix

Chunks = Iterator[tuple[list[str], list[str]]]


@dataclass
class Source:
    """One split to encode: (source lines, target lines) chunks, re-readable, counted before any write."""

    name: str
    chunks: Callable[[], Chunks]
    count: int
    clean: bool


def file_source(
    name: str, prefix: str, langs: tuple[str, str], on_bad_utf8: str, clean: bool, chunk_pairs: int
) -> Source:
    """PREFIX.{source lang} and PREFIX.{target lang} (either may end in .gz), same line count, read in chunks; a
    PREFIX that is a glob or a directory is every file pair it names (corpus_files), read one after the other as if
    concatenated, never copied. A PREFIX that names translation files (.tmx, .po, .mo, .xlf/.xliff, or a directory
    or glob holding them) is read as their pairs instead (translation_file_source)."""
    if is_translation_files(prefix):
        return translation_file_source(name, prefix, langs, clean, chunk_pairs)
    pairs, counts = corpus_files(prefix, langs), []
    for src_path, tgt_path in pairs:
        src_count, tgt_count = count_lines(src_path), count_lines(tgt_path)
        check(src_count == tgt_count, f"{src_path} has {src_count} lines but {tgt_path} has {tgt_count} lines")
        counts.append(src_count)
    chunks = functools.partial(_files_chunks, pairs, counts, on_bad_utf8, chunk_pairs)
    return Source(name, chunks, sum(counts), clean)


def translation_file_source(name: str, prefix: str, langs: tuple[str, str], clean: bool, chunk_pairs: int) -> Source:
    """The pairs of PREFIX's translation files (mtkit.corpus.translation_files), read once to count them (and to
    refuse a file of another language before anything is written), then again for each reading of the chunks."""
    paths, counts = translation_files(prefix), PairCounts()
    for _ in read_pairs(paths, langs, counts):
        pass
    check(counts.pairs > 0, f"{prefix}: its translation files hold no translated entry")
    if counts.uneven_lines:
        log(
            f"{prefix}: {counts.pairs} pairs from {len(paths)} file(s); {counts.uneven_lines} entries of several "
            "lines joined into one pair each (source and target have different line counts)"
        )
    chunks = functools.partial(_translation_chunks, paths, langs, chunk_pairs)
    return Source(name, chunks, counts.pairs, clean)


def _translation_chunks(
    paths: list[Path], langs: tuple[str, str], chunk_pairs: int, start: int = 0, end: int | None = None
) -> Chunks:
    """Pairs [start, end) of the files, chunk_pairs at a time."""
    pairs = itertools.islice(read_pairs(paths, langs), start, end)
    while chunk := list(itertools.islice(pairs, chunk_pairs)):
        yield [src for src, _ in chunk], [tgt for _, tgt in chunk]


def corpus_files(prefix: str, langs: tuple[str, str]) -> list[tuple[Path, Path]]:
    """The (source, target) files of PREFIX: PREFIX.{lang} (or .gz) itself; for a glob (`corpus/part-*`) each
    match of PREFIX.{source lang} (or .gz) with its target partner, in sorted order; for a directory, every file of
    it so named. A match without its partner, or a glob or directory that names no file, is a one-line error."""
    if not glob.has_magic(prefix) and not Path(prefix).is_dir():
        return [(resolve_prefix(prefix, langs[0]), resolve_prefix(prefix, langs[1]))]
    pattern = prefix if glob.has_magic(prefix) else str(Path(prefix) / "*")
    ends = (f".{langs[0]}", f".{langs[0]}.gz")
    stems = sorted({match.removesuffix(".gz")[: -len(ends[0])] for end in ends for match in glob.glob(pattern + end)})
    check(stems, f"{prefix}: no file matches {pattern}{ends[0]} (or {ends[1]})")
    return [(resolve_prefix(stem, langs[0]), resolve_prefix(stem, langs[1])) for stem in stems]


def _files_chunks(
    pairs: list[tuple[Path, Path]],
    counts: list[int],
    on_bad_utf8: str,
    chunk_pairs: int,
    start: int = 0,
    end: int | None = None,
) -> Chunks:
    """Pairs [start, end) of the files one after the other, each file's in chunks (_file_chunks)."""
    end = sum(counts) if end is None else end
    offset = 0
    for (src_path, tgt_path), count in zip(pairs, counts):
        first, last = max(start - offset, 0), min(end - offset, count)
        if first < last:
            yield from _file_chunks(src_path, tgt_path, on_bad_utf8, chunk_pairs, first, last)
        offset += count


def _file_chunks(
    src_path: Path, tgt_path: Path, on_bad_utf8: str, chunk_pairs: int, start: int = 0, end: int | None = None
) -> Chunks:
    """chunk_pairs lines of both files at a time, as files.read_lines splits and decodes them: lines [start, end),
    those before `start` skipped undecoded."""
    with open_binary(src_path) as src_file, open_binary(tgt_path) as tgt_file:
        src, tgt = itertools.islice(src_file, start, end), itertools.islice(tgt_file, start, end)
        lineno = start + 1
        while src_raw := list(itertools.islice(src, chunk_pairs)):
            tgt_raw = list(itertools.islice(tgt, chunk_pairs))
            check(len(src_raw) == len(tgt_raw), f"{src_path}, {tgt_path}: files changed while being read")
            yield (
                _decode_lines(src_raw, src_path, lineno, on_bad_utf8),
                _decode_lines(tgt_raw, tgt_path, lineno, on_bad_utf8),
            )
            lineno += len(src_raw)


def _decode_lines(raw: list[bytes], path: Path, first_lineno: int, on_bad_utf8: str) -> list[str]:
    """One decode and split for the whole chunk (8x faster than line by line); on invalid UTF-8,
    line by line again so that the error names its line."""
    try:
        lines = b"".join(raw).decode("utf-8").split("\n")
    except UnicodeDecodeError:
        return [decode_line(line.rstrip(b"\n"), path, first_lineno + i, on_bad_utf8) for i, line in enumerate(raw)]
    if not lines[-1]:
        lines.pop()  # the chunk's last "\n" (a final line without one is never empty)
    if any(line.endswith("\r") for line in lines):
        lines = [line[:-1] if line.endswith("\r") else line for line in lines]  # CRLF files
    return lines


def load_hf_split(
    name: str,
    config: str | None,
    split: str,
    src_lang: str,
    tgt_lang: str,
    data_files: str | list | dict | None = None,
    cache_dir: str | None = None,
):  # -> datasets.Dataset (not imported at module level)
    """One split of a hub dataset, a builder such as "json" with `data_files`, or a DatasetDict saved with
    `save_to_disk`, checked to have both languages in its `translation` column."""
    # datasets takes about a second to import and only this path needs it.
    import datasets

    try:
        if (Path(name) / "dataset_dict.json").is_file():
            saved = datasets.load_from_disk(name)
            check(split in saved, f"{name}: no split {split!r} (has {', '.join(saved)}); set hf_splits")
            dataset = saved[split]
        else:
            dataset = datasets.load_dataset(name, config, split=split, data_files=data_files, cache_dir=cache_dir)
    except (OSError, ValueError, ConnectionError) as exc:
        raise UserError(f"{name}: cannot load split {split!r} ({exc})") from None
    check("translation" in dataset.column_names, f"{name}: no `translation` column (has {dataset.column_names})")
    feature = dataset.features["translation"]
    langs = list(getattr(feature, "languages", None) or feature)
    for lang in (src_lang, tgt_lang):
        check(lang in langs, f"{name}: split {split!r} has no {lang!r} translations (has {', '.join(langs)})")
    return dataset.select_columns(["translation"])


def hf_chunks(
    dataset, src_lang: str, tgt_lang: str, chunk_pairs: int, start: int = 0, end: int | None = None
) -> Chunks:  # dataset: datasets.Dataset
    """chunk_pairs rows [start, end) at a time; a missing translation reads as an empty line."""
    if start or end is not None:
        dataset = dataset.select(range(start, len(dataset) if end is None else end))
    for batch in dataset.iter(batch_size=chunk_pairs):
        rows = batch["translation"]
        yield [row[src_lang] or "" for row in rows], [row[tgt_lang] or "" for row in rows]


def hf_source(name: str, dataset, langs: tuple[str, str], clean: bool, chunk_pairs: int) -> Source:
    """A loaded split (load_hf_split) as a Source."""
    chunks = functools.partial(hf_chunks, dataset, langs[0], langs[1], chunk_pairs)
    return Source(name, chunks, len(dataset), clean)


def source_span(source: Source, start: int, end: int) -> Source:
    """Pairs [start, end) of `source` as a Source of their own (a shard's share of a corpus): a file's lines before
    `start` are skipped undecoded, and an error still names its line's number in the whole file."""
    assert 0 <= start <= end <= source.count, (start, end, source.count)
    return Source(source.name, functools.partial(source.chunks, start=start, end=end), end - start, source.clean)
