"""EngineConfig: which engine, device and precision run a model, and each engine's own extras (an ensemble, packed
linears, threads): every setting a model load takes but the search's (mtkit.search.config.SearchOverrides). Each
default and help is declared here once; the commands, `mtkit serve` and the bulk jobs read them from here. Plain data
and its checks: it imports mtkit.errors only and loads nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from mtkit.errors import check

ENGINES = ("torch", "ctranslate2")  # what --engine takes; mtkit.engines.factory loads each
CT2_SEARCHES = ("exact", "native")  # what --ct2-search takes; mtkit.engines.ct2 runs each
ENSEMBLE_MODES = ("log-linear", "linear")  # what --ensemble-mode takes; mtkit.search.step combines by each


@dataclass
class EngineConfig:
    """The engine factory's choices: the engine and its search are checked here; the device and dtype by the engine
    when it loads, which knows what the machine runs."""

    engine: str = field(
        default="torch",
        metadata={
            "help": "torch (mtkit's own search) or ctranslate2: the same output, faster start-up, less memory, "
            "no torch; MODEL may then also be an `mtkit export` directory."
        },
    )
    device: str = field(default="auto", metadata={"help": "auto (cuda when available, else cpu), cpu or cuda."})
    dtype: str = field(
        default="fp32",
        metadata={
            "help": "fp32, bf16, fp16, or auto: bf16 where the device runs it natively, else fp32. "
            "--engine ctranslate2 also takes int8, int8_float32 (and float16, bfloat16 where the device has them)."
        },
    )
    ct2_search: str = field(
        default="exact",
        metadata={
            "help": "--engine ctranslate2's search: exact (mtkit's own: the torch engine's lines, GNMT length penalty, "
            "each sentence's own maximum length) or native (CTranslate2's own: score / length ** alpha, one "
            "maximum length per batch; faster, for bulk work such as back-translation)."
        },
    )
    shortlist: bool = field(
        default=False,
        metadata={
            "help": "--engine ctranslate2: each batch chooses only among the target pieces the run's lexical "
            "shortlist allows its source pieces (`mtkit shortlist`), the frequent ones and each piece's best: "
            "faster, probabilities over the shortlist."
        },
    )

    ensemble_mode: str = field(
        default="log-linear",
        metadata={
            "help": "How --ensemble combines its models at each step: log-linear (the mean of their log-probabilities, "
            "as Marian and OpenNMT-py do) or linear (the log of the mean of their probabilities, as fairseq and "
            "Sockeye do)."
        },
    )

    ensemble: tuple[Path, ...] = field(
        default=(),
        metadata={"help": "More checkpoints to ensemble with MODEL."},  # --engine torch (CT2Translator refuses them)
    )
    packed: bool = field(
        default=True,
        metadata={
            "help": "--engine torch: float32 CPU linears go through oneDNN with packed weights (mtkit.model.packed)."
        },
    )
    threads: int = field(
        default=0,
        metadata={
            "help": "Threads per batch (CTranslate2's intra_threads; torch: its thread count); 0: the cores (or "
            "OMP_NUM_THREADS) shared by the workers."
        },
    )

    def __post_init__(self) -> None:
        self.ensemble = tuple(Path(path) for path in self.ensemble)  # a command line gives a list
        check(self.engine in ENGINES, f"--engine {self.engine}: choose one of {', '.join(ENGINES)}")
        check(
            self.ensemble_mode in ENSEMBLE_MODES,
            f"--ensemble-mode {self.ensemble_mode}: choose one of {', '.join(ENSEMBLE_MODES)}",
        )
        check(
            self.ct2_search in CT2_SEARCHES, f"--ct2-search {self.ct2_search}: choose one of {', '.join(CT2_SEARCHES)}"
        )
        check(self.threads >= 0, "--threads must be >= 0 (0: the usable cores)")
