"""The CTranslate2 model of a run: an `mtkit export` directory as given, or the run's model exported on first use
and cached in RUN_DIR/ctranslate2, keyed by the checkpoint it came from.

A cache is used only when its key names the checkpoint the run means now (path, size, mtime, recorded sha256)
and the run's shortlist as it is now (`mtkit shortlist`: made, made again or removed is exported again), and every
file it lists is there at its size; anything else (a new checkpoint, a missing or truncated file, bad
metadata) is exported again, never trusted. Exporting needs torch: the caller passes an Exporter (mtkit.engines.factory
imports mtkit.exports.ctranslate2 only when it runs), so a warm cache starts without torch and this module stays
below both.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mtkit.console import log
from mtkit.corpus.shortlist_record import read_shortlist
from mtkit.errors import check
from mtkit.file_names import CACHE_KEY_NAME, CHECKPOINT_DIR, METADATA_NAME, MODEL_NAME, SPM_NAME
from mtkit.files import write_text
from mtkit.runs.checkpoint_files import checkpoint_candidate, checkpoint_identity, run_directory

CACHE_DIR = "ctranslate2"  # in RUN_DIR


@dataclass(frozen=True)
class Exporter:
    """How a run becomes a CTranslate2 model: the checkpoint it means (verified), and the export of one."""

    resolve: Callable[[Path], Path]
    export: Callable[[Path, Path], None]


def is_export(path: Path) -> bool:
    """An `mtkit export --to ctranslate2` directory (or a cache: one with the same files)."""
    return path.is_dir() and (path / MODEL_NAME).is_file() and (path / METADATA_NAME).is_file()


def read_metadata(path: Path) -> dict[str, Any]:
    """An export's mtkit.json; a missing or unreadable one is a one-line error."""
    try:
        metadata = json.loads((path / METADATA_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        metadata = {"error": str(exc)}
    check(
        metadata.get("format") == "mtkit-ctranslate2-export" and (path / SPM_NAME).is_file(),
        f"{path}: not a complete `mtkit export --to ctranslate2` directory ({METADATA_NAME}, {SPM_NAME})",
    )
    return metadata


def cache_path(path: Path) -> Path:
    """RUN_DIR/ctranslate2 for a run directory or a checkpoint in it (RUN_DIR/checkpoints/step_*.pt, average.pt)."""
    return run_directory(path) / CACHE_DIR


# What the exporter writes, as a revision: a cache of another (an older mtkit's) is exported again. 2: the alignment
# of return_attention is the torch engine's (the decoder layer before the last, all heads), 2026-12-02.
EXPORT_REVISION = 2


def cache_key(cache: Path) -> dict[str, Any] | None:
    """The cache's key, when the cache is whole: every file it lists present at its size; else None."""
    try:
        key = json.loads((cache / CACHE_KEY_NAME).read_text(encoding="utf-8"))
        files = key["files"]
        whole = all((cache / name).stat().st_size == size for name, size in files.items())
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return key if whole and MODEL_NAME in files and METADATA_NAME in files else None


def model_directory(path: str | Path, exporter: Exporter | None, rebuild: bool = False) -> Path:
    """The CTranslate2 model directory for `path`: an export as given, else the run's cache (made when stale).

    `rebuild`: export again even when the key matches (CTranslate2 could not load a cache that looked whole).
    `exporter` None: only an export directory or a warm cache will do.
    """
    path = Path(path)
    if is_export(path) and not (path / CHECKPOINT_DIR).exists():
        return path
    cache = cache_path(path)
    key = cache_key(cache)
    if not rebuild and key is not None and key["checkpoint"] == checkpoint_identity(checkpoint_candidate(path)):
        if key.get("shortlist") == shortlist_digest(path) and key.get("revision") == EXPORT_REVISION:
            return cache
    check(
        exporter is not None,
        f"{path}: no CTranslate2 model here yet; load it through mtkit.engines.factory.load_translator, "
        "which exports it on first use",
    )
    return export_to_cache(path, cache, None if rebuild else key, exporter)


def shortlist_digest(path: Path) -> str | None:
    """The sha256 of the run's shortlist.txt as its record states it (checked against the text), None without one."""
    info = read_shortlist(run_directory(path))
    return None if info is None else info["sha256"]


def export_to_cache(path: Path, cache: Path, key: dict[str, Any] | None, exporter: Exporter) -> Path:
    """Export the checkpoint `path` means (verified: damaged newer ones are skipped) into `cache`, then write its key.

    The export itself is atomic; the key, written after it, commits it.
    """
    source = exporter.resolve(path)
    identity, shortlist = checkpoint_identity(source), shortlist_digest(path)
    if key is not None and (key["checkpoint"], key.get("shortlist"), key.get("revision")) == (
        identity,
        shortlist,
        EXPORT_REVISION,
    ):
        return cache  # the newest checkpoint is damaged; the cache is of the one resolve fell back to
    log(f"exporting {source} to CTranslate2 (cached in {cache})")
    if cache.exists():  # stale or damaged: never reused, and export refuses to replace what is not an export
        shutil.rmtree(cache)
    exporter.export(source, cache)
    files = {p.name: p.stat().st_size for p in cache.iterdir() if p.is_file()}
    key = {"checkpoint": identity, "shortlist": shortlist, "revision": EXPORT_REVISION, "files": files}
    write_text(cache / CACHE_KEY_NAME, json.dumps(key, indent=2) + "\n")
    return cache
