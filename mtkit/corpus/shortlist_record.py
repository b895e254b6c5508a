"""A run's lexical shortlist on disk: RUN_DIR/shortlist.txt (CTranslate2's vocabulary map) and shortlist.json, its
record, which the engines check it by. Files only: no numpy, no torch, so a CTranslate2 engine's start-up reads it
(mtkit.corpus.shortlist makes it).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from mtkit.errors import UserError, check
from mtkit.file_names import SHORTLIST_INFO, SHORTLIST_NAME
from mtkit.files import write_text


def write_shortlist(run_dir: Path, text: str, info: dict[str, Any]) -> Path:
    """shortlist.txt and, written after it, shortlist.json (what the engines check it by, with the text's sha256);
    returns the .txt path."""
    write_text(run_dir / SHORTLIST_NAME, text)
    info = {**info, "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}
    write_text(run_dir / SHORTLIST_INFO, json.dumps(info, indent=2) + "\n")
    return run_dir / SHORTLIST_NAME


def read_shortlist(run_dir: Path) -> dict[str, Any] | None:
    """RUN_DIR's shortlist record, None when it has none; a record whose text is missing or not the one it was
    written with (edited, cut short, left from an older shortlist) is a one-line error."""
    info_path, text_path = run_dir / SHORTLIST_INFO, run_dir / SHORTLIST_NAME
    if not info_path.is_file():
        return None
    try:
        info = json.loads(info_path.read_text(encoding="utf-8"))
        whole = hashlib.sha256(text_path.read_bytes()).hexdigest() == info["sha256"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(
            f"{info_path}: unreadable shortlist record ({exc}); make it again with `mtkit shortlist`"
        ) from None
    check(whole, f"{text_path}: not the shortlist {info_path.name} records; make it again with `mtkit shortlist`")
    return info
