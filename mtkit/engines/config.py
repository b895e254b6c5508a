"""EngineConfig: which engine, device and precision run a model, the settings `mtkit translate` and `mtkit serve`
share; each default and help is declared here once. Plain data and its checks: it imports mtkit.errors only and
loads nothing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

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

    def __post_init__(self) -> None:
        check(self.engine in ENGINES, f"--engine {self.engine}: choose one of {', '.join(ENGINES)}")
        check(
            self.ensemble_mode in ENSEMBLE_MODES,
            f"--ensemble-mode {self.ensemble_mode}: choose one of {', '.join(ENSEMBLE_MODES)}",
        )
        check(
            self.ct2_search in CT2_SEARCHES, f"--ct2-search {self.ct2_search}: choose one of {', '.join(CT2_SEARCHES)}"
        )


def same_field(cls: type, name: str) -> Any:
    """A field with the default and help of `cls`'s field `name`, for another config that holds the same setting."""
    source = {f.name: f for f in dataclasses.fields(cls)}[name]
    return field(default=source.default, metadata=source.metadata)
