"""An export's output directory: replaced only when it is empty or an earlier mtkit export (its metadata file).

Stdlib and mtkit's basics only: every export format checks its --out here before it reads a checkpoint.
"""

from __future__ import annotations

from pathlib import Path

from mtkit.errors import check
from mtkit.file_names import METADATA_NAME


def check_export_dir(out: Path) -> None:
    """An existing --out is replaced only if it is empty or an earlier mtkit export, never an unrelated directory."""
    if out.exists():
        check(out.is_dir(), f"{out}: exists and is not a directory")
        check(
            (out / METADATA_NAME).is_file() or not any(out.iterdir()),
            f"{out}: exists and is not an mtkit export; choose another --out",
        )
