"""mtkit.faults: the MTKIT_FAULTS syntax and each point's values, an unknown name or a bad value refused in one line,
nothing armed by default, the variable read once per process, and arming in this process (the arm_faults fixture)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from mtkit.errors import StorageError, UserError
from mtkit.faults import FAULTS_ENV, NAN_STEPS, POINTS, SAVE_DELAY_MS, SAVE_FAIL_AFTER_BYTES, armed, parse
from tests.conftest import ROOT

# Each point, a value written as the tests write it, and what `armed` answers for it.
VALUES = [
    ("nan_steps", "3,4", frozenset({3, 4})),
    ("nan_steps", " 3, 4 ,", frozenset({3, 4})),  # spaces and empty items are ignored, as they always were
    ("oom_steps", "6", frozenset({6})),
    ("kill_rank_at", "1:4", (1, 4)),
    ("kill_rank_at", " 0 : 19", (0, 19)),
    ("backtranslate_pause_ms", "1500", 1500),
    ("save_fail_after_bytes", "0", 0),
    ("save_delay_ms", "5000", 5000),
    ("stale_checkpoint_rank", "1", 1),
    ("state_write_pause_ms", "2000", 2000),
    ("memory_import_pause_ms", "1500", 1500),
]
BAD_VALUES = [
    ("nan_steps", "3,x"),
    ("oom_steps", "-1"),
    ("kill_rank_at", "1"),
    ("kill_rank_at", "a:4"),
    ("kill_rank_at", "1:"),
    ("backtranslate_pause_ms", "1.5"),
    ("save_fail_after_bytes", ""),
    ("save_delay_ms", "5s"),
    ("stale_checkpoint_rank", ""),
    ("state_write_pause_ms", "-5"),
    ("memory_import_pause_ms", "soon"),
]


def run_python(code: str, spec: str | None) -> subprocess.CompletedProcess:
    """`code` in a new interpreter whose MTKIT_FAULTS is `spec` (None: unset)."""
    env = {key: value for key, value in os.environ.items() if key != FAULTS_ENV}
    env |= {FAULTS_ENV: spec} if spec is not None else {}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)


def test_a_spec_arms_several_points() -> None:
    assert parse(" nan_steps = 5,6,7 ;kill_rank_at=1:4;") == {"nan_steps": frozenset({5, 6, 7}), "kill_rank_at": (1, 4)}
    assert parse("") == parse(" ; ") == {}


@pytest.mark.parametrize("name, raw, value", VALUES)
def test_the_value_syntax_of_each_point(name: str, raw: str, value: object) -> None:
    assert parse(f"{name}={raw}") == {name: value}


def test_every_point_has_its_values_tested() -> None:
    assert {name for name, _, _ in VALUES} == {name for name, _ in BAD_VALUES} == POINTS


@pytest.mark.parametrize("name, raw", BAD_VALUES)
def test_a_bad_value_is_refused_in_one_line(name: str, raw: str) -> None:
    with pytest.raises(UserError) as refused:
        parse(f"{name}={raw}")
    message = str(refused.value)
    assert message.startswith(f"MTKIT_FAULTS: {name} takes ") and message.endswith(f"not {raw!r}"), message
    assert "\n" not in message


def test_an_unknown_name_is_refused_in_one_line_listing_the_known_ones() -> None:
    with pytest.raises(UserError) as refused:
        parse("nan_steps=3;nan_step=4")
    message = str(refused.value)
    assert message.startswith("MTKIT_FAULTS: unknown fault point 'nan_step'") and "\n" not in message
    assert all(name in message.split("the known ones: ")[1].split(", ") for name in POINTS), message
    for spec, reason in (("nan_steps", "is not name=value"), ("oom_steps=1;oom_steps=2", "is armed twice")):
        with pytest.raises(UserError, match=reason):
            parse(spec)
    with pytest.raises(KeyError):
        armed("nan_step")  # a product path naming a point that does not exist is a bug


def test_nothing_is_armed_by_default_and_the_variable_is_read_once() -> None:
    code = (
        "import os\n"
        "from mtkit.faults import POINTS, armed\n"
        "print(sorted(name for name in POINTS if armed(name) is not None))\n"
        f"os.environ[{FAULTS_ENV!r}] = 'oom_steps=1'\n"
        "print(armed('oom_steps'))\n"  # the table parsed at first use stays: no call reads the environment again
    )
    unset = run_python(code, None)
    assert unset.returncode == 0 and unset.stdout.splitlines() == ["[]", "None"], unset.stderr
    code = (
        "from mtkit.faults import POINTS, armed\nprint({n: armed(n) for n in sorted(POINTS) if armed(n) is not None})"
    )
    armed_two = run_python(code, "oom_steps=6;save_delay_ms=5")
    assert armed_two.stdout.strip() == "{'oom_steps': frozenset({6}), 'save_delay_ms': 5}", armed_two.stderr


def test_a_bad_variable_is_refused_at_first_use() -> None:
    refused = run_python("from mtkit.faults import armed\narmed('nan_steps')", "nan_steps=1;stale_rank=1")
    assert refused.returncode != 0
    assert "UserError: MTKIT_FAULTS: unknown fault point 'stale_rank'" in refused.stderr.splitlines()[-1]


def test_arm_faults_arms_and_disarms_in_this_process(tmp_path: Path, arm_faults: Callable[[str], None]) -> None:
    from mtkit.runs.checkpoint import save_checkpoint

    arm_faults("save_fail_after_bytes=10;nan_steps=2")
    assert armed(SAVE_FAIL_AFTER_BYTES) == 10 and armed(NAN_STEPS) == frozenset({2})
    with pytest.raises(StorageError, match="No space left on device"):  # the product's path sees it
        save_checkpoint(tmp_path / "c.pt", {"step": 1})
    arm_faults("save_delay_ms=1")  # replaces what was armed
    assert armed(SAVE_FAIL_AFTER_BYTES) is None and armed(SAVE_DELAY_MS) == 1
    save_checkpoint(tmp_path / "c.pt", {"step": 1})
    arm_faults("")
    assert all(armed(name) is None for name in POINTS)
    with pytest.raises(UserError, match="unknown fault point 'bogus'"):
        arm_faults("bogus=1")
