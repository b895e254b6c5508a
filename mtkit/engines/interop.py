"""What mtkit's exports and the CTranslate2 engine share: the metadata file every export writes, the
CTranslate2 import with its install hint, and the rule for an export's output directory.

Stdlib and mtkit.errors only: imported by the torch-free CTranslate2 path and by the exports alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mtkit.errors import UserError, check
from mtkit.file_names import METADATA_NAME

CTRANSLATE2_INSTALL_HINT = "CTranslate2 is not installed: pip install -e '.[ctranslate2]'"


def import_ctranslate2(specs: bool = False) -> Any:
    """The ctranslate2 module, or a one-line UserError saying how to install it; `specs`: with its spec API, which
    exports use. Decoding must not ask for it: ctranslate2.specs imports torch where installed (1.7 s and 170 MiB
    of a 2-core Zen 4's start-up)."""
    try:
        import ctranslate2

        if specs:
            import ctranslate2.specs  # noqa: F401 - the spec API lives in this submodule
    except ImportError:
        raise UserError(CTRANSLATE2_INSTALL_HINT) from None
    return ctranslate2


def check_export_dir(out: Path) -> None:
    """An existing --out is replaced only if it is empty or an earlier mtkit export, never an unrelated directory."""
    if out.exists():
        check(out.is_dir(), f"{out}: exists and is not a directory")
        check(
            (out / METADATA_NAME).is_file() or not any(out.iterdir()),
            f"{out}: exists and is not an mtkit export; choose another --out",
        )
