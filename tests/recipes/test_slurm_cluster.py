"""The Slurm recipes of recipes/cluster/ run under a real Slurm: a one-machine cluster (munged, slurmctld and slurmd on
localhost, from Debian's slurm-wlm and munge) started in a temporary folder with its own configuration, key, ports
and logs. The back-translation array (3 tasks on the CPU) writes the bytes one `mtkit back-translate` process writes,
and the training job (one node, one torchrun of two gloo ranks) ends bit for bit as a plain two-rank torchrun run.
Where Slurm is not installed or its daemons do not come up, the tests skip, saying which.

What this cannot show: one node only (a second slurmd on this host as a second node is refused by slurmctld,
"Duplicated NodeHostName", and other node names would not resolve for the rendezvous), no GPU (the scripts' GPU
requests are overridden on the sbatch command line), no network but the loopback, no shared file system.
"""

from __future__ import annotations

import getpass
import os
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import MULTI30K, ROOT, read_gz_lines
from tests.reliability.common import BIN, TRAIN_SETS, stop_group
from tests.reliability.test_ddp_faults import MAX_STEPS, SAVE_EVERY_STEP, same_final_state, torchrun

CLUSTER = ROOT / "recipes" / "cluster"
DAEMONS = ("munged", "slurmctld", "slurmd")
COMMANDS = ("sbatch", "sinfo", "squeue", "scontrol", "scancel", "srun")
# Daemons live in /usr/sbin, which a user's PATH may lack.
SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
MISSING = [name for name in DAEMONS + COMMANDS if shutil.which(name, path=SEARCH_PATH) is None]
# Decided before any fixture is made: where Slurm is missing, no model is trained for nothing.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        bool(MISSING),
        reason=f"slurm-wlm is not installed ({', '.join(MISSING)} missing): apt-get install slurm-wlm munge",
    ),
]
START_S = 60  # for slurmd to register with slurmctld
JOB_S = 300  # for one sbatch --wait
BT_LINES = 60
BT_CHUNK = 10  # 6 chunks, 2 per task of 3


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def node_line() -> str:
    """This machine as `slurmd -C` sees it (CPUs, sockets, cores, memory), named localhost."""
    found = subprocess.run([shutil.which("slurmd", path=SEARCH_PATH), "-C"], capture_output=True, text=True, timeout=30)
    line = next((line for line in found.stdout.splitlines() if line.startswith("NodeName=")), "")
    words = [word for word in line.split() if word.split("=")[0] in ("CPUs", "SocketsPerBoard", "CoresPerSocket")]
    words += [word for word in line.split() if word.split("=")[0] in ("ThreadsPerCore", "RealMemory")]
    return " ".join(["NodeName=localhost NodeAddr=127.0.0.1", *(words or [f"CPUs={os.cpu_count()}"]), "State=UNKNOWN"])


def slurm_conf(root: Path, user: str) -> str:
    return f"""ClusterName=mtkit-test
SlurmctldHost=localhost
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
SlurmUser={user}
SlurmdUser={user}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/munge/munge.sock
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
MailProg={shutil.which("true") or "/bin/true"}
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
{node_line()}
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


def last_line(path: Path) -> str:
    lines = path.read_text(errors="replace").splitlines() if path.exists() else []
    return lines[-1].strip() if lines else f"{path.name} is empty"


def stop(processes: list[subprocess.Popen]) -> None:
    """SIGTERM to each daemon's process group, newest first, SIGKILL to those still there after 15 s."""
    for process in reversed(processes):
        stop_group(process, 15)


class Cluster:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.env = {**os.environ, "SLURM_CONF": str(root / "slurm.conf"), "OMP_NUM_THREADS": "1"}
        self.env["PATH"] = SEARCH_PATH

    def run(self, *args: str, timeout: float = 30, **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run(args, env=self.env, capture_output=True, text=True, timeout=timeout, **kwargs)

    def sbatch(self, script: str, *options: str, cwd: Path, **variables: str) -> subprocess.CompletedProcess:
        """`sbatch --wait OPTIONS SCRIPT` from `cwd` with `variables` in its environment (sbatch passes them on);
        past JOB_S the job is cancelled."""
        command = ["sbatch", "--wait", "--parsable", *options, str(CLUSTER / script)]
        process = subprocess.Popen(
            command, cwd=cwd, env={**self.env, **variables}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        try:
            stdout, stderr = process.communicate(timeout=JOB_S)
        except subprocess.TimeoutExpired:
            self.run("scancel", "--user", getpass.getuser())
            process.kill()
            stdout, stderr = process.communicate()
            pytest.fail(f"{script}: not done in {JOB_S} s; cancelled. {stderr[-2000:]}")
        return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory):
    """A one-machine Slurm cluster: munged, slurmctld and slurmd on localhost, all in a temporary folder, stopped
    at the end (jobs cancelled, then SIGTERM, then SIGKILL)."""
    root = tmp_path_factory.mktemp("slurm")
    for folder in ("munge", "state", "spool"):
        (root / folder).mkdir()
    (root / "munge").chmod(0o700)
    key = root / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    (root / "slurm.conf").write_text(slurm_conf(root, getpass.getuser()))
    cluster = Cluster(root)
    munge = root / "munge"
    commands = {
        # --force: pytest's folders are private (0700), and munged wants a socket folder anyone may enter.
        "munged": ["munged", "--foreground", "--force", f"--socket={munge}/munge.sock", f"--key-file={key}"]
        + [f"--pid-file={munge}/munged.pid", f"--log-file={munge}/munged.log", f"--seed-file={munge}/munged.seed"],
        "slurmctld": ["slurmctld", "-D", "-f", str(root / "slurm.conf")],
        "slurmd": ["slurmd", "-D", "-N", "localhost", "-f", str(root / "slurm.conf")],
    }
    logs = {"munged": munge / "munged.log", "slurmctld": root / "slurmctld.log", "slurmd": root / "slurmd.log"}
    processes: list[subprocess.Popen] = []
    try:
        for name, command in commands.items():
            with open(root / f"{name}.out", "w") as out:
                processes.append(
                    subprocess.Popen(
                        command,
                        env=cluster.env,
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=out,
                        start_new_session=True,
                    )
                )
            if name == "munged":  # its socket before Slurm's daemons ask it for credentials
                deadline = time.monotonic() + 10
                while not (munge / "munge.sock").exists() and time.monotonic() < deadline:
                    time.sleep(0.1)
        deadline, state = time.monotonic() + START_S, ""
        while time.monotonic() < deadline:
            dead = [name for name, process in zip(commands, processes) if process.poll() is not None]
            if dead:
                name = dead[0]
                pytest.skip(
                    f"{name} exited at start ({processes[list(commands).index(name)].returncode}): "
                    f"{last_line(logs[name])}"
                )
            done = cluster.run("sinfo", "--noheader", "--Node", "--format=%t")
            state = done.stdout.strip()
            if done.returncode == 0 and state == "idle":
                break
            time.sleep(1)
        else:
            pytest.skip(
                f"slurmd did not register within {START_S} s (node state {state or 'none'}): "
                f"{last_line(logs['slurmd'])}"
            )
        yield cluster
    finally:
        try:
            if len(processes) > 1 and processes[1].poll() is None:  # slurmctld is up: end the jobs first
                cluster.run("scancel", "--user", getpass.getuser())
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline and cluster.run("squeue", "--noheader").stdout.strip():
                    time.sleep(1)
        except subprocess.TimeoutExpired:
            pass
        finally:
            stop(processes)


def test_backtranslation_array_writes_what_one_process_writes(slurm: Cluster, de_en_run: Path, tmp_path: Path) -> None:
    """slurm-backtranslate.sbatch as an array of 3 tasks on the CPU (a CPU each: two at once on 2 cores): each takes
    its shard from SLURM_ARRAY_TASK_ID, the last merges, and the merged bt.en and bt.de are one process's bytes."""
    mono = tmp_path / "mono.de"
    mono.write_text("".join(line + "\n" for line in read_gz_lines(MULTI30K / "train.de.gz", 200)[-BT_LINES:]))
    settings = {"MODEL": str(de_en_run), "INPUT": str(mono), "SEED": "1", "CHUNK_LINES": str(BT_CHUNK)}
    job = slurm.sbatch(
        "slurm-backtranslate.sbatch",
        "--array=1-3",
        "--gres=none",  # the script asks for --gres=gpu:1 and this node has none
        "--cpus-per-task=1",
        cwd=tmp_path,
        **settings,
        OUT=str(tmp_path / "bt"),
        DEVICE="cpu",
        VENV=str(BIN.parent),
    )
    logs = {path.name: path.read_text(errors="replace") for path in sorted(tmp_path.glob("mtkit-bt-*.out"))}
    assert job.returncode == 0, (job.stderr, logs)
    assert len(logs) == 3 and all(re.search(r"array task \d of 3", text) for text in logs.values()), logs
    text = "".join(logs.values())
    per_task = BT_LINES // 3
    for task in (1, 2, 3):  # each task took its third of the lines, whole chunks of BT_CHUNK
        assert f"shard {task}/3: lines {(task - 1) * per_task + 1}-{task * per_task}" in text, logs
    assert text.count("the set is complete") == 1, logs  # the last to finish merged

    one = subprocess.run(
        [str(BIN / "mtkit"), "back-translate", str(de_en_run), "--input", str(mono), "--out", str(tmp_path / "one")]
        + ["--seed", "1", "--chunk-lines", str(BT_CHUNK), "--device", "cpu"],
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=JOB_S,
    )
    assert one.returncode == 0, one.stderr
    for lang in ("de", "en"):
        merged, whole = tmp_path / f"bt.{lang}", tmp_path / f"one.{lang}"
        assert merged.read_bytes() == whole.read_bytes()
        assert len(merged.read_text().splitlines()) == BT_LINES
    assert sorted(path.name for path in tmp_path.glob("bt*")) == ["bt.de", "bt.en"]  # shards merged and removed


def test_training_job_trains_as_plain_torchrun(slurm: Cluster, small_data: Path, tmp_path: Path) -> None:
    """slurm-train.sbatch on one node: srun starts one torchrun (c10d rendezvous at the node scontrol names first),
    which starts two gloo ranks on the CPU; the run ends bit for bit as `torchrun --standalone` of two ranks with the
    same recipe (tests/reliability/test_ddp_faults.py's reference)."""
    sets = dict(item.removeprefix("train.").split("=", 1) for item in [*TRAIN_SETS, SAVE_EVERY_STEP])
    max_tokens = int(sets.pop("max_tokens"))  # the script works it out: TOKENS_PER_UPDATE / (ranks x UPDATE_FREQ)
    recipe = tmp_path / "tiny.toml"
    lines = [
        "[model]",
        'arch = "tiny"',
        "[train]",
        f"max_steps = {MAX_STEPS}",
        *(f"{k} = {v}" for k, v in sets.items()),
    ]
    recipe.write_text("\n".join(lines) + "\n")
    run = tmp_path / "slurm-run"
    job = slurm.sbatch(
        "slurm-train.sbatch",
        "--nodes=1",
        "--gpus-per-node=0",  # the script asks for 8 and this node has none
        "--cpus-per-task=2",
        cwd=tmp_path,
        DATA=str(small_data),
        RECIPE=str(recipe),
        RUN=str(run),
        GPUS_PER_NODE="2",
        TOKENS_PER_UPDATE=str(max_tokens * 2),
        PORT=str(free_port()),
        VENV=str(BIN.parent),
    )
    [log] = [path.read_text(errors="replace") for path in tmp_path.glob("mtkit-train-*.out")]
    assert job.returncode == 0, (job.stderr, log[-4000:])
    assert "1 nodes x 2 GPUs, rendezvous at localhost:" in log and f"max_tokens {max_tokens} x " in log, log[-4000:]
    assert log.count("trained to step") == 1, log[-4000:]  # one summary, from rank 0
    assert (run / "average.pt").is_file()

    reference = torchrun(small_data, tmp_path / "torchrun-run", restarts=0)
    assert reference.returncode == 0, reference.stderr[-3000:]
    same_final_state(run, tmp_path / "torchrun-run")
