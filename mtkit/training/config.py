"""What a training run is told: TrainConfig (each option's default and help declared once, in its field), the
learning-rate schedules, and TrainRecipe, what the loop reads of a resolved recipe. No training here."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

from mtkit.corpus.mixing import SAMPLINGS
from mtkit.corpus.modifiers import ModifiersConfig
from mtkit.errors import check
from mtkit.model.precision import PRECISIONS
from mtkit.model.transformer import ModelConfig

SCHEDULES = ("inverse_sqrt", "noam")


class TrainRecipe(Protocol):
    """What training reads of a resolved mtkit.recipe.Recipe (typed here: mtkit.recipe imports this module)."""

    model: ModelConfig
    train: TrainConfig
    translate: Any  # mtkit.search.config.TranslateConfig: validation BLEU's search
    modifiers: ModifiersConfig  # what is done to the training text (upper case, typos, ...)

    def as_dict(self) -> dict[str, Any]: ...


@dataclass
class TrainConfig:
    seed: int = 1
    label_smoothing: float = 0.1
    precision: str = "fp32"  # auto: bf16 where the device runs it natively, else fp32 (mtkit.model.precision)
    lr: float = 1e-3  # peak learning rate (derived from d_model and warm-up when lr_schedule = "noam")
    lr_schedule: str = "inverse_sqrt"
    warmup_steps: int = 4000
    adam_betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-9
    weight_decay: float = 0.0
    clip_norm: float = 0.0
    max_tokens: int = 4096
    update_freq: int = 1
    max_steps: int = 0  # 0: no limit
    max_epochs: int = 0
    max_time_minutes: float = 0.0
    save_interval_steps: int = 0
    save_interval_minutes: float = 10.0
    keep_last: int = 5
    average_last: int = 5
    valid_interval_steps: int = 0  # 0: validate only at the end
    valid_bleu: bool = False
    patience: int = 0  # validations without improvement before stopping; 0: never
    log_interval: int = 50
    compile: bool = False
    device: str = "auto"
    threads: int = 0  # 0: torch's default (OMP_NUM_THREADS)
    max_bad_steps: int = 5  # consecutive non-finite / out-of-memory updates before giving up
    # How long a rank waits in a collective for the others (checkpoint writes and BLEU decoding happen meanwhile).
    dist_timeout_minutes: float = 30.0
    # Fine-tuning: a run directory or checkpoint whose weights a fresh run starts from (fresh optimizer, schedule
    # and step count); "" trains from random weights. A run that has checkpoints resumes and ignores it.
    init_from: str = ""
    ddp_bf16_compress: bool = False  # all-reduce gradients in bf16 across ranks: half the traffic, bf16 rounding
    tensorboard_dir: str = ""  # TensorBoard event files of metrics.jsonl's scalars (rank 0); needs mtkit[tensorboard]
    # Several training corpora (mtkit.corpus.mixing): each epoch's share by corpus weight, or by temperature over
    # language pairs; corpus_weights replaces the weights of the recipe's [[preprocess.corpora]] and of the data's
    # manifest.
    sampling: str = "weights"
    sampling_temperature: float = 1.0
    corpus_weights: dict[str, float] = field(default_factory=dict)
    # Subword regularization (mtkit.corpus.subword_sampling): BPE-dropout's probability, 0 off (Provilkov et al. 2020
    # use 0.1), on both sides or the source only.
    subword_alpha: float = 0.0
    subword_sides: str = "both"

    def __post_init__(self) -> None:
        for name, choices in (("precision", PRECISIONS), ("lr_schedule", SCHEDULES), ("sampling", SAMPLINGS)):
            value = getattr(self, name)
            check(value in choices, f"train.{name} must be one of {', '.join(choices)}, got {value!r}")
        for name in ("update_freq", "max_tokens", "log_interval"):
            check(getattr(self, name) >= 1, f"train.{name} must be at least 1, got {getattr(self, name)}")
        check(
            0.0 <= self.subword_alpha <= 1.0,
            f"train.subword_alpha must be in [0, 1] (0: off), got {self.subword_alpha}",
        )
        check(
            self.sampling_temperature > 0,
            f"train.sampling_temperature must be positive, got {self.sampling_temperature}",
        )
        self.adam_betas = tuple(self.adam_betas)  # type: ignore[assignment]

    def resolved(self, d_model: int) -> TrainConfig:
        """Fill derived fields: the paper's peak lr under "noam". (keep_last counts full checkpoints only: the
        older ones that averaging needs are kept weights-only, see checkpoint.prune_checkpoints.)"""
        lr = noam_peak_lr(d_model, self.warmup_steps) if self.lr_schedule == "noam" else self.lr
        return TrainConfig(**{**self.__dict__, "lr": lr})


def noam_peak_lr(d_model: int, warmup_steps: int) -> float:
    """Peak of the paper's schedule, reached at step = warmup_steps: d_model^-0.5 * warmup^-0.5."""
    return d_model**-0.5 * max(warmup_steps, 1) ** -0.5


def learning_rate(step: int, peak_lr: float, warmup_steps: int) -> float:
    """Linear warm-up to `peak_lr`, then inverse square root (equals the paper's formula for its peak)."""
    step = max(step, 1)
    if warmup_steps <= 0:
        return peak_lr
    return peak_lr * min(step / warmup_steps, math.sqrt(warmup_steps / step))
