"""The ctranslate2 library, imported with a one-line install hint when it is missing: for the CTranslate2 export
(with its spec API) and the CTranslate2 engine (without it).

Stdlib and mtkit.errors only: the torch-free CTranslate2 path imports it.
"""

from __future__ import annotations

from typing import Any

from mtkit.errors import UserError

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
