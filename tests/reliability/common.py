"""Helpers of the reliability tests: the CLI in a subprocess, kill timing, checkpoint audits, figures.

Each test appends its headline figure ("10/10 resumed, 0 corrupt") to $MTKIT_RELIABILITY_REPORT
(JSONL) when that variable is set; tests/reliability/report.py runs the suite and prints them.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import torch

from mtkit.errors import UserError
from mtkit.runs.checkpoint import load_checkpoint, save_checkpoint
from mtkit.runs.checkpoint_files import list_checkpoints

BIN = Path(sys.executable).parent
REPORT_ENV = "MTKIT_RELIABILITY_REPORT"
STEP_LINE = re.compile(r"^step (\d+) \|")
# Every trainer the tests start: tiny model, small batches, a log line per update, one thread
# (bit-identical float32 results need the same reduction order in every process).
# TRAIN_SETS also makes conftest.tiny_recipe, for the runs made in process.
TRAIN_SETS = [
    "train.max_tokens=512",
    "train.warmup_steps=10",
    "train.save_interval_minutes=0",
    "train.log_interval=1",
    "train.threads=1",
]
TRAIN_ARGS = ["--arch", "tiny", *(arg for item in TRAIN_SETS for arg in ("--set", item))]
STARTED: list[Trainer] = []  # every Trainer of the running test


def record(test: str, figure: str, **data: object) -> None:
    """Append one headline figure to $MTKIT_RELIABILITY_REPORT (no-op when unset)."""
    path = os.environ.get(REPORT_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"test": test, "figure": figure, **data}) + "\n")


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a CLI subprocess: the venv's bin first on PATH (torchrun --no-python runs `mtkit`)."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "OMP_NUM_THREADS": "1"}
    env.pop(REPORT_ENV, None)
    return {**env, **(extra or {})}


def mtkit_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "mtkit", *map(str, args)]


def run_bounded(
    command: list[str], timeout: float, env: dict[str, str] | None = None, stdin: bytes | None = None
) -> subprocess.CompletedProcess:
    """Run `command` to completion in its own process group, stdout/stderr as text; no input means an empty stdin
    (never the test runner's). Past `timeout` the whole group (a shell pipeline's commands, torchrun) is asked to
    stop, then killed, and TimeoutExpired raised: subprocess.run's timeout kills only the first process and
    leaves its children running. torchrun stops its ranks (their own sessions) when it gets SIGTERM."""
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(env),
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(stdin, timeout=timeout)
    except BaseException:
        stop_group(process)
        raise
    return subprocess.CompletedProcess(
        command, process.returncode, stdout.decode("utf-8", "replace"), stderr.decode("utf-8", "replace")
    )


def stop_group(process: subprocess.Popen, grace_s: float = 20) -> None:
    """SIGTERM to the process's group, SIGKILL after `grace_s`; its pipes closed."""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, signum)
        except ProcessLookupError:
            break
        try:
            process.communicate(timeout=grace_s)
            break
        except subprocess.TimeoutExpired:
            continue
    for pipe in (process.stdin, process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()


def run_cli(
    *args: str, env: dict[str, str] | None = None, stdin: bytes | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    """Run `mtkit ARGS` to completion; stdout/stderr as text."""
    return run_bounded(mtkit_command(*args), timeout, env, stdin)


def train_args(data_dir: Path, run_dir: Path, max_steps: int, *sets: str) -> list[str]:
    """Arguments of `mtkit train` with TRAIN_ARGS and `--set` for each of `sets`."""
    extra = [arg for item in sets for arg in ("--set", item)]
    return ["train", str(data_dir), "--save-dir", str(run_dir), "--max-steps", str(max_steps), *TRAIN_ARGS, *extra]


def train_command(data_dir: Path, run_dir: Path, max_steps: int, *sets: str) -> list[str]:
    return mtkit_command(*train_args(data_dir, run_dir, max_steps, *sets))


class Trainer:
    """A `mtkit train` subprocess whose stderr is read line by line in a thread (step lines are counted)."""

    def __init__(self, command: list[str], env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=cli_env(env),
            encoding="utf-8",
            errors="replace",
        )
        STARTED.append(self)  # tests/conftest.py kills any still running when its test ends
        self.lines: list[str] = []
        self.steps: list[int] = []
        self.step_times: list[float] = []  # time.monotonic() when each step line arrived
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            with self._changed:
                self.lines.append(line)
                if match := STEP_LINE.match(line):
                    self.steps.append(int(match.group(1)))
                    self.step_times.append(time.monotonic())
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    def wait_steps(self, count: int, timeout: float = 90) -> bool:
        """Block until this process logged `count` updates; False when it exited first."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(self.steps) < count:
                if not self._reader.is_alive() or time.monotonic() > deadline:
                    return False
                self._changed.wait(0.05)
        return True

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def finish(self, timeout: float = 120) -> int:
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        self._reader.join(10)
        return code

    def kill(self) -> None:
        """SIGKILL if still running, and reap it."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=60)

    @property
    def stderr(self) -> str:
        return "".join(self.lines)


def kill9(trainer: Trainer) -> int:
    trainer.signal(signal.SIGKILL)
    return trainer.finish()


def temporaries(run_dir: Path) -> list[Path]:
    """Files a save writes before its rename (dot-names ending in .tmp) anywhere in the run directory."""
    return sorted(p for p in Path(run_dir).rglob(".*.tmp"))


def audit_checkpoints(run_dir: Path) -> tuple[int, list[str]]:
    """(number of step checkpoints, those that fail load_checkpoint)."""
    paths = list_checkpoints(run_dir)
    corrupt = []
    for path in paths:
        try:
            load_checkpoint(path)
        except UserError as exc:
            corrupt.append(str(exc))
    return len(paths), corrupt


def newest_step(run_dir: Path) -> int:
    paths = list_checkpoints(run_dir)
    return load_checkpoint(paths[-1])["step"] if paths else 0


def differing_tensors(a: object, b: object, path: str = "") -> list[str]:
    """Paths where two nested dict/list/tensor structures differ (types included; torch.equal on tensors)."""
    if type(a) is not type(b):
        return [f"{path} type"]
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        same = a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
        return [] if same else [path]
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return [f"{path} keys"]
        return [d for key in a for d in differing_tensors(a[key], b[key], f"{path}.{key}")]
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return [f"{path} length"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differing_tensors(x, y, f"{path}[{i}]")]
    return [] if a == b else [path]


def forced_logits_checkpoint(source: Path, target: Path, logits: dict[int, float]) -> Path:
    """Copy of checkpoint `source` whose decoder gives each token of `logits` that logit at every step.

    The last decoder LayerNorm makes feature 0 constant (weight 0, bias 1) and each listed token's
    output row reads only that feature, so its logit is fixed whatever the input: -1e4 for eos gives
    a model that never ends a sentence by itself, +1e4 a model that always emits that token.
    """
    from mtkit.model.transformer import ModelConfig, Transformer

    payload = load_checkpoint(source)
    model = Transformer(ModelConfig(**payload["configs"]["model"]))
    model.load_state_dict(payload["model"])
    final = model.decoder.final_norm
    norm = final if isinstance(final, torch.nn.LayerNorm) else model.decoder.layers[-1].residuals[-1].norm
    with torch.no_grad():
        norm.weight[0], norm.bias[0] = 0.0, 1.0
        for token, logit in logits.items():
            model.output.weight[token] = 0.0
            model.output.weight[token, 0] = logit
    payload = {**payload, "model": {k: v.detach().clone() for k, v in model.state_dict().items()}}
    save_checkpoint(target, payload)
    return target
