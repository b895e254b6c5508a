"""The word alignments of a data directory's training corpora, kept beside the binarized text for term hints: each
corpus's kept pairs decoded with the directory's sentencepiece model, split into the tokens term hints link
(mtkit.corpus.term_hints.TOKEN) and aligned once (mtkit.corpus.alignments, seeded). Per split, `{split}.links.bin`
holds each pair's (source, target) token indexes back to back, `{split}.links.idx` n+1 int64 offsets into it, and
`{split}.links.json`, written last, the record that they are complete and of which text; each file is written
atomically, so a killed run leaves no set that passes for complete, and a complete one is reused (and carried into a
directory preprocessed again from the same text). `TermLinks` reads them by training sentence, as the batches index
it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from mtkit.console import log
from mtkit.corpus.alignments import AlignConfig, Link, align
from mtkit.corpus.binarized import ParallelData, data_paths, training_corpora
from mtkit.corpus.term_hints import TOKEN, aligned_text
from mtkit.errors import check
from mtkit.file_names import LINKS_NAME, SPM_NAME
from mtkit.files import atomic_write, file_sha256, write_text
from mtkit.tokenizer import Tokenizer

LINKS_FORMAT = 1


def links_paths(data_dir: str | Path, split: str) -> tuple[Path, Path, Path]:
    """The (.bin, .idx, .json) paths of a split's alignments."""
    stem = Path(data_dir) / LINKS_NAME.format(split=split)
    return stem.with_name(stem.name + ".bin"), stem.with_name(stem.name + ".idx"), stem.with_name(stem.name + ".json")


def source_lead(manifest: dict, entry: dict) -> int:
    """How many ids preprocess put before each source of a training corpus (`entry`, its manifest record): the
    language token, the corpus tag."""
    return int(bool(manifest.get("language_tokens"))) + int(bool(entry.get("tag")))


def _record(data_dir: Path, entry: dict, cfg: AlignConfig) -> dict:
    """What a complete set of a split's alignments records: the text it aligns (its binarized files' hashes and
    pairs), the tokens and the aligner's settings."""
    sides = (entry["source_lang"], entry["target_lang"])
    return {
        "format": LINKS_FORMAT,
        "pairs": entry["pairs"],
        "tokens": TOKEN.pattern,
        "align": {"seed": cfg.seed, "samplers": cfg.samplers, "null_prior": cfg.null_prior},
        "bin_sha256": [file_sha256(data_paths(data_dir, entry["split"], lang)[0]) for lang in sides],
    }


def complete(data_dir: str | Path, entry: dict, cfg: AlignConfig) -> bool:
    """Whether a training corpus's alignments are there, complete and of its text as it is now."""
    bin_path, idx_path, record_path = links_paths(data_dir, entry["split"])
    if not (record_path.is_file() and bin_path.is_file() and idx_path.is_file()):
        return False
    try:
        record = json.loads(record_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False
    expected = _record(Path(data_dir), entry, cfg)
    return {key: record.get(key) for key in expected} == expected and idx_path.stat().st_size == (
        entry["pairs"] + 1
    ) * 8


def ensure_alignments(data_dir: str | Path, manifest: dict, seed: int = 1) -> list[str]:
    """Align every training corpus of `data_dir` whose alignments are missing, incomplete or of other text; returns
    the splits aligned now (a complete set is reused: [] when every corpus has one)."""
    data_dir, cfg = Path(data_dir), AlignConfig(seed=seed)
    tokenizer = Tokenizer.load(data_dir / SPM_NAME)
    done = []
    for entry in training_corpora(manifest).values():
        if complete(data_dir, entry, cfg):
            continue
        log(f"aligning {entry['split']} ({entry['pairs']:,} pairs) for term hints with eflomal")
        data = ParallelData.open(data_dir, entry["split"], entry["source_lang"], entry["target_lang"])
        lead = source_lead(manifest, entry)
        src = tokenizer.decode([data.src(i)[lead:].tolist() for i in range(len(data))])
        tgt = tokenizer.decode([data.tgt(i).tolist() for i in range(len(data))])
        links = align([aligned_text(text) for text in src], [aligned_text(text) for text in tgt], cfg)
        write_links(data_dir, entry["split"], links)
        write_text(links_paths(data_dir, entry["split"])[2], json.dumps(_record(data_dir, entry, cfg)) + "\n")
        done.append(entry["split"])
    return done


def carry_alignments(old_dir: str | Path, new_dir: str | Path, manifest: dict, seed: int = 1) -> list[str]:
    """Each training corpus's alignments copied from `old_dir` (the directory a new preprocess run replaces) into
    `new_dir` where they are complete for the new directory's text (the same pairs, encoded alike): preprocessing
    the same corpus again does not align it again. Returns the splits carried over."""
    old_dir, new_dir, cfg = Path(old_dir), Path(new_dir), AlignConfig(seed=seed)
    carried = []
    for entry in training_corpora(manifest).values():
        old = links_paths(old_dir, entry["split"])
        if not all(path.is_file() for path in old):
            continue
        for path, new in zip(old, links_paths(new_dir, entry["split"])):
            shutil.copyfile(path, new)
        if complete(new_dir, entry, cfg):
            carried.append(entry["split"])
        else:
            for new in links_paths(new_dir, entry["split"]):
                new.unlink()
    return carried


def write_links(data_dir: str | Path, split: str, links: list[list[Link]]) -> None:
    """Each pair's links as `{split}.links.bin` (uint16 index pairs; int32 where an index passes 65,535) and
    `.idx` (n+1 int64 offsets, in links), each written atomically."""
    bin_path, idx_path, _ = links_paths(data_dir, split)
    flat = np.asarray([index for pair in links for link in pair for index in link], dtype=np.int64)
    dtype = np.uint16 if not len(flat) or flat.max() < 65535 else np.int32
    offsets = np.cumsum([0] + [len(pair) for pair in links], dtype=np.int64)
    with atomic_write(bin_path, "wb") as handle:
        handle.write(np.ascontiguousarray(flat, dtype=dtype).tobytes())
    with atomic_write(idx_path, "wb") as handle:
        handle.write(offsets.tobytes())


class TermLinks:
    """The links of every training sentence, in the order of the training data (the corpora as training_corpora
    lists them, as the batches' indices count them), memory-mapped."""

    def __init__(self, data_dir: str | Path, manifest: dict, seed: int = 1) -> None:
        self.parts: list[tuple[np.ndarray, np.ndarray]] = []
        cfg = AlignConfig(seed=seed)
        for entry in training_corpora(manifest).values():
            check(
                complete(data_dir, entry, cfg),
                f"{links_paths(data_dir, entry['split'])[2]}: no complete word alignments of corpus "
                f"{entry['split']} for term hints (mtkit preprocess writes them)",
            )
            bin_path, idx_path, _ = links_paths(data_dir, entry["split"])
            offsets = np.fromfile(idx_path, dtype=np.int64)
            dtype = np.uint16 if bin_path.stat().st_size == int(offsets[-1]) * 2 * 2 else np.int32
            flat = np.memmap(bin_path, dtype=dtype, mode="r") if offsets[-1] else np.zeros(0, dtype)
            self.parts.append((flat, offsets))
        self.starts = np.cumsum([0] + [len(offsets) - 1 for _, offsets in self.parts])

    def links(self, index: int) -> list[Link]:
        """Training sentence `index`'s (source, target) token links."""
        k = int(np.searchsorted(self.starts, index, side="right")) - 1
        flat, offsets = self.parts[k]
        i = index - int(self.starts[k])
        pairs = np.asarray(flat[2 * offsets[i] : 2 * offsets[i + 1]]).reshape(-1, 2).tolist()
        return [(a, b) for a, b in pairs]
