"""The engine factory: `load_translator(path, engine)` picks mtkit's own search (torch) or CTranslate2 by name,
and gives the CTranslate2 engine the way to export a run's checkpoint on first use.

Above both engines (the CLI, the server and back-translation import it). Imports no torch itself: engine
"ctranslate2" with a warm cache never imports it; engine "torch", or an export, imports it when called.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mtkit.engines.config import CT2_SEARCHES, ENGINES, ENSEMBLE_MODES
from mtkit.engines.contract import Translating
from mtkit.engines.ct2_cache import Exporter
from mtkit.errors import check


def _resolve_checkpoint(path: Path) -> Path:
    from mtkit.engines.torch_engine import resolve_checkpoint

    return resolve_checkpoint(path)


def _export_ctranslate2(checkpoint: Path, out: Path) -> None:
    from mtkit.engines.ct2_export import export_ctranslate2

    export_ctranslate2(checkpoint, out)


# A run's checkpoint -> CTranslate2 model, for the engine's cache (mtkit.engines.ct2_cache); torch is imported only
# here.
EXPORT_ON_FIRST_USE = Exporter(resolve=_resolve_checkpoint, export=_export_ctranslate2)


def load_translator(
    path: str | Path,
    engine: str = "torch",
    device: str = "auto",
    dtype: str | None = None,
    ct2_search: str = "exact",
    shortlist: bool = False,
    ensemble_mode: str = "log-linear",
    **overrides: Any,
) -> Translating:
    """A translator of RUN_DIR / a checkpoint (either engine) or of an `mtkit export` directory (ctranslate2).

    `dtype` None is each engine's default (fp32 / float32); `ct2_search` is ctranslate2's (exact or native), and
    `shortlist` (search the model's vocabulary map's candidates only); `ensemble_mode` how the torch engine
    combines an ensemble's models (log-linear or linear);
    `overrides` are TranslateConfig fields and the engine's own options (torch: ensemble, packed; ctranslate2:
    threads).
    """
    check(engine in ENGINES, f"--engine {engine}: choose one of {', '.join(ENGINES)}")
    check(
        ensemble_mode in ENSEMBLE_MODES,
        f"--ensemble-mode {ensemble_mode}: choose one of {', '.join(ENSEMBLE_MODES)}",
    )
    check(ct2_search in CT2_SEARCHES, f"--ct2-search {ct2_search}: choose one of {', '.join(CT2_SEARCHES)}")
    check(
        engine == "ctranslate2" or ct2_search == "exact",
        f"--ct2-search {ct2_search}: --engine {engine} runs mtkit's own search; use --engine ctranslate2",
    )
    check(
        engine == "ctranslate2" or not shortlist,
        f"--shortlist: --engine {engine} scores the whole vocabulary; use --engine ctranslate2 (its vocabulary map)",
    )
    if engine == "ctranslate2":
        from mtkit.engines.ct2 import CT2Translator

        return CT2Translator.load(
            path,
            device=device,
            dtype=dtype or "float32",
            exporter=EXPORT_ON_FIRST_USE,
            native=ct2_search == "native",
            shortlist=shortlist,
            **overrides,
        )
    from mtkit.engines.torch_engine import Translator

    return Translator.load(path, device=device, dtype=dtype or "fp32", ensemble_mode=ensemble_mode, **overrides)
