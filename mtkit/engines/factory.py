"""The engine factory: `load_translator(path, EngineConfig(...), SearchOverrides(...))` picks mtkit's own search
(torch) or CTranslate2 by the config's engine, and gives the CTranslate2 engine the way to export a run's checkpoint
on first use.

Above both engines (the CLI, the server and back-translation import it). Imports no torch itself: engine
"ctranslate2" with a warm cache never imports it; engine "torch", or an export, imports it when called.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mtkit.engines.config import EngineConfig
from mtkit.engines.contract import Translating
from mtkit.engines.ct2_cache import Exporter
from mtkit.errors import check
from mtkit.search.config import SearchOverrides


def _resolve_checkpoint(path: Path) -> Path:
    from mtkit.runs.checkpoint import resolve_checkpoint

    return resolve_checkpoint(path)


def _export_ctranslate2(checkpoint: Path, out: Path) -> None:
    from mtkit.exports.ctranslate2 import export_ctranslate2

    export_ctranslate2(checkpoint, out)


# A run's checkpoint -> CTranslate2 model, for the engine's cache (mtkit.engines.ct2_cache); torch is imported only
# here.
EXPORT_ON_FIRST_USE = Exporter(resolve=_resolve_checkpoint, export=_export_ctranslate2)


def load_translator(
    path: str | Path, engine_cfg: EngineConfig | None = None, search: SearchOverrides | None = None
) -> Translating:
    """A translator of RUN_DIR / a checkpoint (either engine) or of an `mtkit export` directory (ctranslate2).

    `engine_cfg`: which engine, on what, with its extras (EngineConfig's defaults when None); `search`: the
    TranslateConfig fields set over the run's recipe (none when None). EngineConfig checked its own values; what
    one engine cannot run is refused here.
    """
    engine_cfg = engine_cfg or EngineConfig()
    overrides = (search or SearchOverrides()).changes()
    engine = engine_cfg.engine
    check(
        engine == "ctranslate2" or engine_cfg.ct2_search == "exact",
        f"--ct2-search {engine_cfg.ct2_search}: --engine {engine} runs mtkit's own search; use --engine ctranslate2",
    )
    check(
        engine == "ctranslate2" or not engine_cfg.shortlist,
        f"--shortlist: --engine {engine} scores the whole vocabulary; use --engine ctranslate2 (its vocabulary map)",
    )
    # What either engine's load takes alike; each call adds its engine's own extras.
    common: dict[str, Any] = {
        "device": engine_cfg.device,
        "dtype": engine_cfg.dtype,
        "ensemble": list(engine_cfg.ensemble),
        "threads": engine_cfg.threads,
    }
    if engine == "ctranslate2":
        from mtkit.engines.ct2 import CT2Translator

        return CT2Translator.load(
            path,
            exporter=EXPORT_ON_FIRST_USE,
            native=engine_cfg.ct2_search == "native",
            shortlist=engine_cfg.shortlist,
            **common,
            **overrides,
        )
    from mtkit.engines.torch_engine import TorchTranslator

    return TorchTranslator.load(
        path, packed=engine_cfg.packed, ensemble_mode=engine_cfg.ensemble_mode, **common, **overrides
    )
