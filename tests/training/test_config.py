"""The budget schedules by hand: the rates at the warm-up's end, mid-decay and the budget's end, the decay a step
budget gives, the one a time budget decides, the averaging window, and the refusals."""

from __future__ import annotations

import math

import pytest

from mtkit.errors import UserError
from mtkit.training.config import (
    TrainConfig,
    averaging_start,
    budget_learning_rate,
    decay_plan,
    decide_decay,
    scheduled_lr,
    step_budget_plan,
    time_budget_end,
    time_decay_due,
)


def config(schedule: str, **values: object) -> TrainConfig:
    return TrainConfig(lr_schedule=schedule, lr=1e-3, warmup_steps=10, **values)  # type: ignore[arg-type]


def test_linear_warms_up_then_reaches_zero_at_the_step_budget() -> None:
    cfg = config("linear", max_steps=110)
    assert step_budget_plan(cfg) == (10, 110)
    rates = {step: scheduled_lr(cfg, step, step_budget_plan(cfg)) for step in (5, 10, 11, 60, 109, 110, 111)}
    assert rates[5] == pytest.approx(5e-4)  # half-way up the warm-up
    assert rates[10] == pytest.approx(1e-3)  # the warm-up's end: the peak
    assert rates[11] == pytest.approx(1e-3 * 99 / 100)
    assert rates[60] == pytest.approx(5e-4)  # half-way down
    assert rates[109] == pytest.approx(1e-5)
    assert rates[110] == 0.0 and rates[111] == 0.0  # the floor at the budget's end, and after it


def test_cosine_and_the_floor() -> None:
    cfg = config("cosine", max_steps=110, lr_floor=0.1)
    plan = step_budget_plan(cfg)
    assert scheduled_lr(cfg, 10, plan) == pytest.approx(1e-3)
    # a quarter of the decay: 0.1 + 0.9 * (1 + cos(pi / 4)) / 2 of the peak
    assert scheduled_lr(cfg, 35, plan) == pytest.approx(1e-3 * (0.1 + 0.9 * (1 + math.sqrt(0.5)) / 2))
    assert scheduled_lr(cfg, 60, plan) == pytest.approx(1e-3 * 0.55)  # half-way: half-way to the floor
    assert scheduled_lr(cfg, 110, plan) == pytest.approx(1e-4)  # the floor: 0.1 of the peak


def test_wsd_holds_the_peak_then_decays_over_the_last_fraction() -> None:
    cfg = config("wsd", max_steps=100, decay_fraction=0.2)
    plan = step_budget_plan(cfg)
    assert plan == (80, 100)
    assert scheduled_lr(cfg, 10, plan) == pytest.approx(1e-3)
    assert scheduled_lr(cfg, 50, plan) == pytest.approx(1e-3)
    assert scheduled_lr(cfg, 80, plan) == pytest.approx(1e-3)  # the last update at the peak
    assert scheduled_lr(cfg, 90, plan) == pytest.approx(5e-4)
    assert scheduled_lr(cfg, 100, plan) == 0.0
    # a decay longer than what follows the warm-up starts at the warm-up's end
    assert step_budget_plan(config("wsd", max_steps=12, decay_fraction=0.5)) == (10, 12)


@pytest.mark.parametrize(
    ("shape", "quarter"),
    [("linear", 0.75), ("cosine", (1 + math.sqrt(0.5)) / 2), ("sqrt", 0.5)],
)
def test_wsd_decay_shapes(shape: str, quarter: float) -> None:
    cfg = config("wsd", max_steps=100, decay_fraction=0.4, decay_shape=shape, lr_floor=0.1)
    plan = step_budget_plan(cfg)
    assert plan == (60, 100)
    assert scheduled_lr(cfg, 60, plan) == pytest.approx(1e-3)  # the peak up to the decay, whatever its shape
    assert scheduled_lr(cfg, 70, plan) == pytest.approx(1e-3 * (0.1 + 0.9 * quarter))  # a quarter of the decay
    assert scheduled_lr(cfg, 100, plan) == pytest.approx(1e-4)  # the floor at the budget's end


def test_an_undecided_decay_is_the_peak_and_a_decay_inside_warm_up_takes_the_lower_rate() -> None:
    assert budget_learning_rate(5, 1e-3, 10, None, "linear", 0.0) == pytest.approx(5e-4)
    assert budget_learning_rate(500, 1e-3, 10, None, "linear", 0.0) == pytest.approx(1e-3)
    assert budget_learning_rate(5, 1e-3, 10, (2, 6), "linear", 0.0) == pytest.approx(2.5e-4)  # decay 2.5e-4 < 5e-4
    assert budget_learning_rate(3, 1e-3, 10, (2, 4), "linear", 0.0) == pytest.approx(3e-4)  # warm-up 3e-4 < decay 5e-4


def test_the_older_schedules_are_unchanged() -> None:
    cfg = config("inverse_sqrt")
    assert scheduled_lr(cfg, 40, None) == pytest.approx(1e-3 * math.sqrt(10 / 40))


def test_a_time_budget_decides_and_a_step_budget_does_not_record() -> None:
    timed = config("wsd", max_time_minutes=10.0)
    assert decay_plan(timed, (0, 0)) is None and decay_plan(timed, (400, 500)) == (400, 500)
    assert decay_plan(config("wsd", max_steps=100), (0, 0)) == (80, 100)
    # wsd: due when the last fifth of the 600 s remains; linear and cosine at the warm-up's end
    assert not time_decay_due(timed, 300, 479.0) and time_decay_due(timed, 300, 480.0)
    linear = config("linear", max_time_minutes=10.0)
    assert not time_decay_due(linear, 9, 1.0) and time_decay_due(linear, 10, 1.0)
    # 400 updates in 480 s at 1.2 s an update: the remaining 120 s buy 100 more
    assert time_budget_end(400, 480.0, 1.2, 10.0) == pytest.approx(500.0)
    assert time_budget_end(400, 700.0, 1.2, 10.0) == 400.0  # past the budget: nothing more
    assert decide_decay(timed, 400, True, 500.4) == (400, 500)
    assert decide_decay(timed, 400, False, 500.4) is None
    assert decide_decay(timed, 400, True, math.inf) is None  # not measured yet
    assert decide_decay(timed, 400, True, 399.0) == (400, 401)  # at least one update of decay


def test_with_both_budgets_the_one_that_ends_first_governs() -> None:
    both = config("wsd", max_time_minutes=10.0, max_steps=1000)
    assert decide_decay(both, 400, True, 500.0) == (400, 500)  # time ends first
    assert decide_decay(both, 799, False, 5000.0) is None
    assert decide_decay(both, 800, False, 5000.0) == (800, 1000)  # the step budget's decay, started by it
    assert decide_decay(both, 800, False, 900.0) == (800, 900)  # started by steps, time ends first
    assert decide_decay(both, 800, False, math.inf) == (800, 1000)


def test_the_average_takes_the_budgets_end() -> None:
    wsd = config("wsd", max_steps=100)
    assert averaging_start(wsd, step_budget_plan(wsd)) == 81  # inside the decay
    linear = config("linear", max_steps=110)
    assert averaging_start(linear, step_budget_plan(linear)) == 88  # the last fifth: 110 - 22
    assert averaging_start(config("linear", max_steps=110, average_budget_end=False), (10, 110)) == 0
    assert averaging_start(config("wsd", max_time_minutes=1.0), None) == 0  # no decay decided: any
    assert averaging_start(config("inverse_sqrt", max_steps=110), None) == 0


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"lr_schedule": "linear"}, "train.lr_schedule = 'linear' ends with the budget, and there is none: set "),
        ({"lr_schedule": "wsd", "max_epochs": 3}, "set train.max_steps or train.max_time_minutes"),
        ({"lr_schedule": "cosine", "max_steps": 10, "warmup_steps": 10}, "train.warmup_steps \\(10\\) must be below"),
        ({"decay_fraction": 0.0}, "train.decay_fraction must be in \\(0, 1\\]"),
        ({"lr_floor": 1.0}, "train.lr_floor must be in \\[0, 1\\)"),
        ({"decay_shape": "step"}, "train.decay_shape must be one of linear, cosine, sqrt, got 'step'"),
        ({"cpu_matmul": "blis"}, "train.cpu_matmul must be one of auto, onednn, mkl, got 'blis'"),
    ],
)
def test_budget_schedules_refuse_in_one_line(values: dict, message: str) -> None:
    with pytest.raises(UserError, match=message) as caught:
        TrainConfig(**values)
    assert "\n" not in str(caught.value)
