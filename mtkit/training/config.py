"""What a training run is told: TrainConfig (each option's default and help declared once, in its field), the
learning-rate schedules, and TrainRecipe, what the loop reads of a resolved recipe. No training here; importing it
loads neither torch nor numpy (the CLI reads the fields' help)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from mtkit.errors import check

if TYPE_CHECKING:
    from mtkit.corpus.modifiers import ModifiersConfig
    from mtkit.corpus.term_hints import TermHintsConfig
    from mtkit.model.transformer import ModelConfig

SCHEDULES = ("inverse_sqrt", "noam", "linear", "cosine", "wsd")
# How wsd's decay falls from the peak to the floor over its steps: a straight line, a half cosine, or 1 - sqrt(progress)
# (Hägele et al. 2024, "Scaling Laws and Compute-Optimal Training Beyond Fixed Training Durations": the "1-sqrt"
# cooldown, which leaves the peak faster and lingers near the floor).
DECAY_SHAPES = ("linear", "cosine", "sqrt")
# The schedules that end with the budget (train.max_steps and/or max_time_minutes): the rate is lr_floor x lr when
# the budget ends. linear and cosine decay from the warm-up's end; wsd holds the peak, then decays linearly over the
# budget's last decay_fraction.
BUDGET_SCHEDULES = ("linear", "cosine", "wsd")


class TrainRecipe(Protocol):
    """What training reads of a resolved mtkit.recipe.Recipe (typed here: mtkit.recipe imports this module)."""

    model: ModelConfig
    train: TrainConfig
    translate: Any  # mtkit.search.config.TranslateConfig: validation BLEU's search
    modifiers: ModifiersConfig  # what is done to the training text (upper case, typos, ...)
    term_hints: TermHintsConfig  # aligned source terms given their targets inline

    def as_dict(self) -> dict[str, Any]: ...


@dataclass
class TrainConfig:
    """How to train: each field is a [train] recipe key, and where `mtkit train` has the option, its help comes from
    here (metadata "help")."""

    seed: int = field(
        default=1, metadata={"help": "Random seed of the run: initial weights, batch order, dropout, the text's draws."}
    )
    label_smoothing: float = field(default=0.1, metadata={"help": "Label smoothing of the cross-entropy."})
    precision: str = field(
        default="fp32",
        metadata={
            "help": "fp32, bf16, fp16 or auto: bf16 where the device runs it natively, else fp32 "
            "(mtkit.model.precision)."
        },
    )
    lr: float = field(
        default=1e-3,
        metadata={"help": 'Peak learning rate (derived from d_model and warm-up when lr_schedule = "noam").'},
    )
    lr_schedule: str = field(
        default="inverse_sqrt",
        metadata={"help": "The learning-rate schedule: inverse_sqrt, noam, linear, cosine or wsd."},
    )
    warmup_steps: int = field(default=4000, metadata={"help": "Updates of linear warm-up to the peak rate."})
    # Budget schedules (BUDGET_SCHEDULES): wsd's decay is the budget's last decay_fraction (of max_steps, or of
    # max_time_minutes, decided when the remaining time says so); the rate at the budget's end is lr_floor x lr.
    decay_fraction: float = field(
        default=0.2, metadata={"help": "wsd: the decay's share of the budget (of max_steps or max_time_minutes)."}
    )
    decay_shape: str = field(
        default="linear",
        metadata={"help": "wsd: the decay's shape from the peak to the floor: linear, cosine or sqrt (1 - sqrt)."},
    )
    lr_floor: float = field(default=0.0, metadata={"help": "Budget schedules: the rate at the budget's end, x lr."})
    # Budget schedules: the end-of-run average takes only the checkpoints of the budget's end (wsd: its decay; linear
    # and cosine: the last decay_fraction), at most average_last of them; false: the last average_last whatever.
    average_budget_end: bool = field(
        default=True,
        metadata={
            "help": "Budget schedules: average only the checkpoints of the budget's end (at most average_last); "
            "false: the last average_last whatever."
        },
    )
    adam_betas: tuple[float, float] = field(default=(0.9, 0.98), metadata={"help": "Adam's beta1 and beta2."})
    adam_eps: float = field(default=1e-9, metadata={"help": "Adam's epsilon."})
    weight_decay: float = field(default=0.0, metadata={"help": "Adam's weight decay (L2, 0: none)."})
    clip_norm: float = field(default=0.0, metadata={"help": "Clip the gradient norm to this (0: no clipping)."})
    max_tokens: int = field(default=4096, metadata={"help": "Tokens per batch, padding counted."})
    update_freq: int = field(default=1, metadata={"help": "Batches accumulated into one update."})
    max_steps: int = field(default=0, metadata={"help": "Stop after this many updates."})  # 0: no limit
    max_epochs: int = field(default=0, metadata={"help": "Stop after this many epochs."})
    max_time_minutes: float = field(default=0.0, metadata={"help": "Stop after this many minutes of training."})
    save_interval_steps: int = field(default=0, metadata={"help": "Save a checkpoint every N updates (0: never)."})
    save_interval_minutes: float = field(
        default=10.0, metadata={"help": "Save a checkpoint every this many minutes (0: never)."}
    )
    keep_last: int = field(default=5, metadata={"help": "Full checkpoints kept (the newest)."})
    average_last: int = field(default=5, metadata={"help": "Checkpoints averaged at the end of the run."})
    valid_interval_steps: int = field(
        default=0, metadata={"help": "Validate every N updates (0: validate only at the end)."}
    )
    valid_bleu: bool = field(default=False, metadata={"help": "Also decode the validation set and score its BLEU."})
    patience: int = field(default=0, metadata={"help": "Validations without improvement before stopping (0: never)."})
    log_interval: int = field(default=50, metadata={"help": "Log every N updates (train.log_interval)."})
    compile: bool = field(default=False, metadata={"help": "Run the model through torch.compile."})
    device: str = field(
        default="auto", metadata={"help": "auto (this rank's GPU when CUDA is available, else the CPU), cuda or cpu."}
    )
    threads: int = field(default=0, metadata={"help": "CPU threads (0: torch's default, OMP_NUM_THREADS)."})
    cpu_matmul: str = field(
        default="auto",
        metadata={
            "help": "float32 matrix products of training on CPU: onednn (1.5x MKL's update on an AMD Zen 5, "
            "where MKL ran at its AVX2 speed, in more memory), mkl (torch's own) or auto (onednn on AVX-512 "
            "kernels, mkl on AVX2 ones)."
        },
    )
    max_bad_steps: int = field(
        default=5, metadata={"help": "Consecutive non-finite or out-of-memory updates before giving up."}
    )
    # How long a rank waits in a collective for the others (checkpoint writes and BLEU decoding happen meanwhile).
    dist_timeout_minutes: float = field(
        default=30.0, metadata={"help": "Minutes a rank waits in a collective for the others."}
    )
    # Fine-tuning: a run directory or checkpoint whose weights a fresh run starts from (fresh optimizer, schedule
    # and step count); "" trains from random weights. A run that has checkpoints resumes and ignores it.
    init_from: str = field(
        default="",
        metadata={
            "help": "Fine-tune: start from this RUN_DIR's newest checkpoint or this checkpoint file "
            "(e.g. RUN_DIR/average.pt) with a fresh optimizer, schedule and step count (train.init_from). Same "
            "sentencepiece model and architecture required. Ignored when --save-dir has checkpoints: that run resumes."
        },
    )
    ddp_bf16_compress: bool = field(
        default=False,
        metadata={"help": "All-reduce gradients in bf16 across ranks: half the traffic, bf16 rounding."},
    )
    # TensorBoard event files of metrics.jsonl's scalars (rank 0); needs mtkit[tensorboard].
    tensorboard_dir: str = field(
        default="",
        metadata={
            "help": "Also write metrics.jsonl's scalars as TensorBoard events here (train.tensorboard_dir; needs the "
            "tensorboard package)."
        },
    )
    # Several training corpora (mtkit.corpus.mixing): each epoch's share by corpus weight, or by temperature over
    # language pairs; corpus_weights replaces the weights of the recipe's [[preprocess.corpora]] and of the data's
    # manifest.
    sampling: str = field(
        default="weights",
        metadata={"help": "Each epoch's share of several corpora: weights (by corpus weight) or temperature."},
    )
    sampling_temperature: float = field(
        default=1.0, metadata={"help": "sampling = temperature: the temperature over language pairs."}
    )
    corpus_weights: dict[str, float] = field(
        default_factory=dict,
        metadata={"help": "Corpus name -> weight, over the recipe's [[preprocess.corpora]] and the data's manifest."},
    )
    # Subword regularization (mtkit.corpus.subword_sampling): BPE-dropout's probability, 0 off (Provilkov et al. 2020
    # use 0.1), on both sides or the source only.
    subword_alpha: float = field(default=0.0, metadata={"help": "BPE-dropout's probability (0: off)."})
    subword_sides: str = field(default="both", metadata={"help": "BPE-dropout on both sides or the source only."})

    def __post_init__(self) -> None:
        # Imported here: the module itself imports no torch or numpy, so the CLI reads the fields' help without them.
        from mtkit.corpus.mixing import SAMPLINGS
        from mtkit.model.onednn import CPU_MATMULS
        from mtkit.model.precision import PRECISIONS

        named = (
            ("precision", PRECISIONS),
            ("lr_schedule", SCHEDULES),
            ("decay_shape", DECAY_SHAPES),
            ("cpu_matmul", CPU_MATMULS),
        )
        for name, choices in (*named, ("sampling", SAMPLINGS)):
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
        self._check_budget_schedule()

    def _check_budget_schedule(self) -> None:
        check(0.0 < self.decay_fraction <= 1.0, f"train.decay_fraction must be in (0, 1], got {self.decay_fraction}")
        check(
            0.0 <= self.lr_floor < 1.0,
            f"train.lr_floor must be in [0, 1) (a fraction of train.lr), got {self.lr_floor}",
        )
        if self.lr_schedule not in BUDGET_SCHEDULES:
            return
        check(
            self.max_steps > 0 or self.max_time_minutes > 0,
            f"train.lr_schedule = {self.lr_schedule!r} ends with the budget, and there is none: set train.max_steps "
            "or train.max_time_minutes (--max-steps, --max-time)",
        )
        check(
            not self.max_steps or self.warmup_steps < self.max_steps,
            f"train.lr_schedule = {self.lr_schedule!r}: train.warmup_steps ({self.warmup_steps}) must be below "
            f"train.max_steps ({self.max_steps})",
        )

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


def scheduled_lr(cfg: TrainConfig, step: int, plan: tuple[int, int] | None) -> float:
    """The rate of update `step` (1-based) under cfg.lr_schedule; `plan` is a budget schedule's decay (decay_plan)."""
    if cfg.lr_schedule not in BUDGET_SCHEDULES:
        return learning_rate(step, cfg.lr, cfg.warmup_steps)
    shape = {"cosine": "cosine", "wsd": cfg.decay_shape}.get(cfg.lr_schedule, "linear")
    return budget_learning_rate(step, cfg.lr, cfg.warmup_steps, plan, shape, cfg.lr_floor)


def budget_learning_rate(
    step: int, peak_lr: float, warmup_steps: int, plan: tuple[int, int] | None, shape: str, floor: float
) -> float:
    """Linear warm-up to `peak_lr`, the peak held until the decay's first step `plan[0]`, then down to floor x peak at
    `plan[1]` (the budget's last update) and held there, by `shape` (DECAY_SHAPES). `plan` None: the decay is not
    decided yet (the peak after warm-up). A decay decided inside the warm-up takes the lower of the two."""
    step = max(step, 1)
    warm = min(step / warmup_steps, 1.0) if warmup_steps > 0 else 1.0
    if plan is None or step <= plan[0]:
        return peak_lr * warm
    start, end = plan
    progress = min((step - start) / (end - start), 1.0) if end > start else 1.0
    if shape == "cosine":
        fall = 0.5 * (1.0 + math.cos(math.pi * progress))
    elif shape == "sqrt":
        fall = 1.0 - math.sqrt(progress)
    else:
        fall = 1.0 - progress
    return peak_lr * min(warm, floor + (1.0 - floor) * fall)


def step_budget_plan(cfg: TrainConfig) -> tuple[int, int] | None:
    """The decay (its start: the last update at the peak; its end: the budget's last update) of train.max_steps alone,
    a pure function of the config; None without a step budget."""
    if not cfg.max_steps:
        return None
    end = cfg.max_steps
    if cfg.lr_schedule == "wsd":
        return min(max(cfg.warmup_steps, end - round(cfg.decay_fraction * end)), end), end
    return min(cfg.warmup_steps, end), end


def decay_plan(cfg: TrainConfig, recorded: tuple[int, int]) -> tuple[int, int] | None:
    """The decay a budget schedule follows: the one recorded in the training state ((0, 0): none yet) under a time
    budget, else the step budget's."""
    if cfg.max_time_minutes > 0:
        return recorded if recorded[1] else None
    return step_budget_plan(cfg)


def time_decay_due(cfg: TrainConfig, step: int, wall: float) -> bool:
    """Whether the time budget starts the decay at update `step`, `wall` training seconds in: wsd when its last
    decay_fraction remains, linear and cosine at the warm-up's end."""
    if cfg.lr_schedule == "wsd":
        return wall >= (1.0 - cfg.decay_fraction) * cfg.max_time_minutes * 60
    return step >= cfg.warmup_steps


def time_budget_end(done: int, wall: float, seconds_per_update: float, max_time_minutes: float) -> float:
    """The update at which the time budget runs out: `done` updates after `wall` seconds, then as many more as the
    remaining seconds buy at `seconds_per_update`."""
    return done + max(max_time_minutes * 60 - wall, 0.0) / seconds_per_update


def decide_decay(cfg: TrainConfig, step: int, time_due: bool, time_end: float) -> tuple[int, int] | None:
    """The decay a time-budgeted run records after update `step`, once the time (`time_due`, from
    time_decay_due) or the step budget says it starts; None: not yet. It ends where the budget that ends first ends:
    the time budget at update `time_end` (time_budget_end; inf when not measured yet), or train.max_steps."""
    steps = step_budget_plan(cfg)
    if not time_due and (steps is None or step < steps[0]):
        return None
    end = min(time_end, steps[1] if steps is not None else math.inf)
    if math.isinf(end):
        return None  # the time budget's pace is not measured yet: decided after the next update
    return step, max(math.floor(end), step + 1)


def averaging_start(cfg: TrainConfig, plan: tuple[int, int] | None) -> int:
    """The first step whose checkpoint the end-of-run average takes (0: any): a budget schedule's end (wsd: its
    decay; linear and cosine: the budget's last decay_fraction, whose rates are at most about that share of the
    peak), unless train.average_budget_end is off."""
    if cfg.lr_schedule not in BUDGET_SCHEDULES or not cfg.average_budget_end or plan is None:
        return 0
    start, end = plan
    return start + 1 if cfg.lr_schedule == "wsd" else end - round(cfg.decay_fraction * end)
