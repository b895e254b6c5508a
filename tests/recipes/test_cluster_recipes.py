"""The cluster recipes (recipes/cluster/) cannot go stale: each script passes `bash -n`; each `mtkit COMMAND` in
them names a command of the app, only options that command declares and all it requires, and no more arguments
than it takes; each torchrun option is one torchrun's own parser declares; the #SBATCH lines are `--key=value` or
`--key value` of known sbatch options, above the first command. Then each script runs against fake `srun`,
`scontrol`, `torchrun` and `mtkit` (no Slurm, GPU, network or model): the commands it starts are recorded, each
`mtkit` process's arguments parsed as the app parses them and its shard worked out from its environment as
`mtkit.bulk.shards` does. The checkers are run on broken scripts too, to see that each problem is reported.
"""

from __future__ import annotations

import ast
import importlib.util
import itertools
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import typer

from mtkit.bulk.shards import resolve_shard
from mtkit.cli.main import app
from tests.conftest import ROOT

CLUSTER = ROOT / "recipes" / "cluster"
SCRIPTS = ("slurm-train.sbatch", "slurm-backtranslate.sbatch", "torchrun-train.sh", "torchrun-backtranslate.sh")
# The mtkit commands each script starts: a script whose invocations the parser misses fails here.
COMMANDS = {
    "slurm-train.sbatch": ["train"],
    "slurm-backtranslate.sbatch": ["back-translate"],
    "torchrun-train.sh": ["train"],
    "torchrun-backtranslate.sh": ["back-translate", "back-translate"],
}
# Long options of sbatch and srun the recipes may use (Slurm's manual pages); a misspelt one fails.
SLURM_OPTIONS = frozenset(
    "account array constraint cpus-per-task error exclusive gpus gpus-per-node gpus-per-task gres job-name "
    "kill-on-bad-exit mail-type mail-user mem mem-per-cpu mem-per-gpu nodes ntasks ntasks-per-node open-mode output "
    "partition qos requeue signal time".split()
)
SBATCH_LINE = re.compile(r"#SBATCH --(?P<key>[a-z][a-z-]*)(?:(?:=| )(?P<value>\S+))?")


def script(name: str) -> str:
    return (CLUSTER / name).read_text(encoding="utf-8")


def commands(text: str) -> list[tuple[int, str]]:
    """The script's command lines with the line each starts on: comment lines dropped, a ` # comment` cut, lines
    ending in a backslash joined to the next."""
    joined: list[tuple[int, str]] = []
    pending, start = "", 0
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("#") and not pending:
            continue
        line = re.sub(r"(^|\s)#.*", "", line)
        start = start if pending else number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        joined.append((start, pending + line))
        pending = ""
    return joined


def invocations(text: str, program: str) -> list[tuple[int, list[str]]]:
    """(line, words after `program`) for each time a command line runs `program`, up to a `|`, `;` or `&`."""
    found = []
    for number, line in commands(text):
        for part in re.split(r"[|;&]", line):
            if re.search(rf"(?<![\w/.$-]){re.escape(program)}(?![\w/.-])", part):
                words = shlex.split(part)
                found += [(number, words[i + 1 :]) for i, word in enumerate(words) if word == program]
    return found


def mtkit_problems(text: str) -> list[str]:
    """Each `mtkit COMMAND ARGS` of `text` whose command the app lacks, or whose options the command does not
    declare, whose required options are missing or whose positional arguments are too many or too few."""
    group = typer.main.get_command(app)  # typer's own copy of click: its classes are not click's
    problems = []
    for number, words in invocations(text, "mtkit"):
        if not words or words[0] not in group.commands:
            problems.append(f"line {number}: mtkit {words[0] if words else ''}: no such command")
            continue
        name, command = words[0], group.commands[words[0]]
        options = {opt: param for param in command.params for opt in (*param.opts, *param.secondary_opts)}
        options |= dict.fromkeys(group.context_settings.get("help_option_names", ["--help"]))
        given, positional, i = set(), 0, 1
        while i < len(words):
            word, i = words[i], i + 1
            if word in ('"$@"', "$@") or re.fullmatch(r"\$\{\w+\[@\]\}", word):
                positional = -1  # words known at run time only: no count
            elif word.startswith("-"):
                option = word.split("=", 1)[0]
                param = options.get(option)
                if option not in options:
                    problems.append(f"line {number}: mtkit {name} {option}: no such option")
                elif param is not None:
                    given.add(param.name)
                takes_value = param is not None and not getattr(param, "is_flag", False)
                unknown_with_value = option not in options and i < len(words) and not words[i].startswith("-")
                if "=" not in word and (takes_value or unknown_with_value):
                    i += 1  # its value
            elif positional >= 0:
                positional += 1
        required = [p for p in command.params if p.param_type_name == "option" and p.required and p.name not in given]
        problems += [f"line {number}: mtkit {name}: {p.opts[0]} is required" for p in required]
        arguments = [p for p in command.params if p.param_type_name == "argument"]
        least = sum(p.nargs for p in arguments if p.required)
        if positional >= 0 and not least <= positional <= sum(p.nargs for p in arguments):
            problems.append(f"line {number}: mtkit {name}: {positional} arguments, takes {least}")
    return problems


def torchrun_options() -> frozenset[str]:
    """The option strings torchrun's parser declares, read from torch/distributed/run.py without importing torch."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        pytest.skip("torch is not installed")
    tree = ast.parse((Path(spec.origin).parent / "distributed" / "run.py").read_text(encoding="utf-8"))
    return frozenset(
        arg.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument"
        for arg in node.args
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("-")
    )


def torchrun_problems(text: str, known: frozenset[str]) -> list[str]:
    """Each torchrun option of `text` that torchrun lacks, and each torchrun without `--no-python` before the
    program (torchrun runs a Python file otherwise, and `mtkit` is a command, not a file)."""
    problems = []
    for number, words in invocations(text, "torchrun"):
        if "--no-python" not in words:
            problems.append(f"line {number}: torchrun without --no-python")
        launcher = words[: words.index("--no-python")] if "--no-python" in words else words
        options = [word.split("=", 1)[0] for word in launcher if word.startswith("-")]
        problems += [f"line {number}: torchrun {option}: no such option" for option in options if option not in known]
    return problems


def sbatch_problems(text: str) -> list[str]:
    """Each #SBATCH line that is not `--key=value` or `--key value`, names an option outside SLURM_OPTIONS, repeats
    one, or comes after the first command (sbatch reads none past it)."""
    problems, seen, first_command = [], set(), None
    for number, line in enumerate(text.splitlines(), 1):
        if first_command is None and line.strip() and not line.lstrip().startswith("#"):
            first_command = number
        if not line.startswith("#SBATCH"):
            continue
        match = SBATCH_LINE.fullmatch(line.rstrip())
        if match is None:
            problems.append(f"line {number}: {line!r}: not --key=value or --key value")
            continue
        if match["key"] not in SLURM_OPTIONS:
            problems.append(f"line {number}: --{match['key']}: not an sbatch option")
        if match["key"] in seen:
            problems.append(f"line {number}: --{match['key']} given twice")
        seen.add(match["key"])
        if first_command is not None:
            problems.append(f"line {number}: #SBATCH after the first command (line {first_command}): sbatch ignores it")
    return problems


def sbatch_header(text: str) -> dict[str, str | None]:
    return {m["key"]: m["value"] for m in map(SBATCH_LINE.fullmatch, text.splitlines()) if m}


def default(text: str, variable: str) -> str:
    """The value a script gives `variable` when the environment does not: `NAME=${NAME:-value}`."""
    match = re.search(rf"^{variable}=\$\{{{variable}:-([^}}$]+)\}}$", text, flags=re.M)
    assert match, f"{variable}: no default"
    return match.group(1)


@pytest.mark.parametrize("name", SCRIPTS)
def test_scripts_parse(name: str) -> None:
    done = subprocess.run(["bash", "-n", str(CLUSTER / name)], capture_output=True, text=True, timeout=10)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("name", SCRIPTS)
def test_mtkit_and_torchrun_lines_are_ones_they_take(name: str) -> None:
    text = script(name)
    assert [words[0] for _, words in invocations(text, "mtkit")] == COMMANDS[name]
    assert mtkit_problems(text) == []
    assert torchrun_problems(text, torchrun_options()) == []
    for _, words in invocations(text, "srun"):  # its options, written --key=value, up to the program it starts
        options = [word[2:].split("=")[0] for word in itertools.takewhile(lambda w: w.startswith("-"), words)]
        assert options and set(options) <= SLURM_OPTIONS


@pytest.mark.parametrize("name", [name for name in SCRIPTS if name.endswith(".sbatch")])
def test_sbatch_headers_parse(name: str) -> None:
    text = script(name)
    assert sbatch_problems(text) == []
    header = sbatch_header(text)
    assert "requeue" in header and header["open-mode"] == "append"  # a requeued job goes on, and so does its log
    if name == "slurm-train.sbatch":
        assert header["ntasks-per-node"] == "1"  # one torchrun per node
        assert header["gpus-per-node"] == default(text, "GPUS_PER_NODE")
        assert (ROOT / default(text, "RECIPE")).is_file()
    else:
        assert re.fullmatch(r"\d+-\d+", header["array"] or "")  # ids without gaps: shards from the array


def test_the_checkers_report_what_is_broken() -> None:
    broken = (
        "#!/usr/bin/env bash\n"
        "#SBATCH --nodes=2\n"
        "#SBATCH --node=2\n"
        "#SBATCH --time 1:00:00 # a comment\n"
        "#SBATCH --nodes=3\n"
        "set -e\n"
        "#SBATCH --requeue\n"
        "mtkit translat runs/x\n"
        "mtkit back-translate runs/x --input a \\\n    --out b --sed 3 --shard 1/2\n"
        "mtkit train data --config r.toml\n"
        "mtkit merge-shards a b | tail -n 1\n"
        "exec torchrun --nproc_per_node 2 --nodes 2 --no-python mtkit average runs/x --last 3\n"
        "torchrun --standalone mtkit average runs/x\n"
    )
    assert sbatch_problems(broken) == [
        "line 3: --node: not an sbatch option",
        "line 4: '#SBATCH --time 1:00:00 # a comment': not --key=value or --key value",
        "line 5: --nodes given twice",
        "line 7: #SBATCH after the first command (line 6): sbatch ignores it",
    ]
    assert mtkit_problems(broken) == [
        "line 8: mtkit translat: no such command",
        "line 9: mtkit back-translate --sed: no such option",
        "line 11: mtkit train: --save-dir is required",
        "line 12: mtkit merge-shards: 2 arguments, takes 1",
    ]
    assert torchrun_problems(broken, torchrun_options()) == [
        "line 13: torchrun --nodes: no such option",
        "line 14: torchrun without --no-python",
    ]
    assert [words[:2] for _, words in invocations(broken, "mtkit")][-2:] == [["average", "runs/x"]] * 2


# The fakes record their arguments (one a line) and, for mtkit, the variables that decide a shard and a device.
FAKE_MTKIT = """#!/usr/bin/env bash
{
    for v in RANK WORLD_SIZE LOCAL_RANK CUDA_VISIBLE_DEVICES OMP_NUM_THREADS SLURM_ARRAY_TASK_ID \\
        SLURM_ARRAY_TASK_COUNT SLURM_ARRAY_TASK_MIN SLURM_ARRAY_TASK_STEP; do
        if [[ -v $v ]]; then printf 'env %s=%s\\n' "$v" "${!v}"; fi
    done
    printf 'arg %s\\n' "$@"
} >"$(mktemp "$FAKE_LOG/mtkit.XXXXXX")"
[[ " $* " != *" ${FAKE_FAIL:-none} "* ]]
"""
FAKE_TORCHRUN = """#!/usr/bin/env bash
printf '%s\\n' "$@" >"$(mktemp "$FAKE_LOG/torchrun.XXXXXX")"
nnodes=1 nproc=1
while (($#)); do
    case $1 in
    --nnodes) nnodes=$2 && shift 2 ;;
    --nproc-per-node) nproc=$2 && shift 2 ;;
    --no-python) shift && break ;;
    *) shift 2 ;;
    esac
done
status=0
for ((i = 0; i < nproc; i++)); do
    RANK=$i LOCAL_RANK=$i WORLD_SIZE=$((nnodes * nproc)) "$@" || status=1
done
exit $status
"""
FAKE_SRUN = """#!/usr/bin/env bash
printf '%s\\n' "$@" >"$(mktemp "$FAKE_LOG/srun.XXXXXX")"
while [[ $1 == -* ]]; do shift; done
exec "$@"
"""
# The second name comes a moment after the first, as from a real scontrol listing many nodes: a script that reads
# only the first through a pipe (`| head -n 1`) under pipefail dies of SIGPIPE here every time, not once in a while.
FAKE_SCONTROL = """#!/usr/bin/env bash
[[ "$1 $2" == "show hostnames" ]] || exit 0
echo node-a
sleep 0.2
echo node-b
"""


@pytest.fixture
def fake_cluster(tmp_path: Path):
    """Runs a script of recipes/cluster with the fakes as its environment's bin (VENV) and `env` set; returns the
    process and what the fakes recorded: {program: [(arguments, environment), ...]}."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    fakes = {"mtkit": FAKE_MTKIT, "torchrun": FAKE_TORCHRUN, "srun": FAKE_SRUN, "scontrol": FAKE_SCONTROL}
    for name, text in fakes.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)

    def run(name: str, *args: str, **env: str) -> tuple[subprocess.CompletedProcess, dict[str, list]]:
        log = tmp_path / f"log-{len(list(tmp_path.glob('log-*')))}"
        log.mkdir()
        base = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "FAKE_LOG": str(log), "VENV": str(bin_dir.parent)}
        done = subprocess.run(
            ["bash", str(CLUSTER / name), *args],
            cwd=tmp_path,
            env={**base, **env},
            capture_output=True,
            text=True,
            timeout=30,
        )
        recorded: dict[str, list] = {name: [] for name in fakes}
        for path in sorted(log.iterdir()):
            lines = path.read_text().splitlines()
            if path.name.startswith("mtkit."):
                argv = [line[4:] for line in lines if line.startswith("arg ")]
                environ = dict(line[4:].split("=", 1) for line in lines if line.startswith("env "))
                recorded["mtkit"].append((argv, environ))
            else:
                recorded[path.name.split(".")[0]].append((lines, {}))
        return done, recorded

    return run


def parsed(argv: list[str]) -> tuple[str, dict]:
    """The command and its parameters as the app parses `mtkit ARGV` (a wrong option or argument raises)."""
    command = typer.main.get_command(app).commands[argv[0]]
    return argv[0], command.make_context(f"mtkit {argv[0]}", argv[1:]).params


def shard(params: dict, environ: dict[str, str]) -> tuple[int, int] | None:
    spec = resolve_shard(params["shard"], environ)
    return None if spec is None else (spec.index, spec.count)


def test_slurm_train_starts_one_torchrun_per_node(fake_cluster) -> None:
    slurm = {"SLURM_NNODES": "2", "SLURM_JOB_NODELIST": "node-[a-b]", "SLURM_JOB_ID": "4242"}
    done, recorded = fake_cluster("slurm-train.sbatch", GPUS_PER_NODE="2", **slurm)
    assert done.returncode == 0, done.stderr
    [(srun, _)] = recorded["srun"]
    assert srun[:2] == ["--ntasks-per-node=1", "--kill-on-bad-exit=1"] and srun[2] == "torchrun"
    [(torchrun, _)] = recorded["torchrun"]
    launcher = "--nnodes 2 --nproc-per-node 2 --rdzv-backend c10d --rdzv-endpoint node-a:29500 --rdzv-id 4242"
    assert " ".join(torchrun).startswith(launcher + " --max-restarts 3 --no-python mtkit train ")
    assert len(recorded["mtkit"]) == 2  # one rank per GPU
    for argv, _ in recorded["mtkit"]:
        command, params = parsed(argv)
        assert command == "train" and str(params["save_dir"]) == "runs/wmt14-en-de-big"
        assert params["overrides"] == ["train.max_tokens=6250", "train.update_freq=1"]  # 25,000 / (2 x 2)


def test_slurm_array_tasks_take_their_shards(fake_cluster) -> None:
    for task in ("1", "3", "8"):
        array = {"SLURM_ARRAY_TASK_COUNT": "8", "SLURM_ARRAY_TASK_MIN": "1", "SLURM_ARRAY_TASK_STEP": "1"}
        done, recorded = fake_cluster(
            "slurm-backtranslate.sbatch", SLURM_ARRAY_TASK_ID=task, SLURM_ARRAY_JOB_ID="77", **array
        )
        assert done.returncode == 0, done.stderr
        [(argv, environ)] = recorded["mtkit"]
        command, params = parsed(argv)
        assert command == "back-translate" and params["shard"] is None and params["device"] == "cuda"
        assert shard(params, environ) == (int(task), 8)


def test_torchrun_train_on_each_node(fake_cluster) -> None:
    for node, is_host in (("0", "1"), ("1", "0")):
        done, recorded = fake_cluster("torchrun-train.sh", node, "node0", NNODES="2", GPUS_PER_NODE="2")
        assert done.returncode == 0, done.stderr
        [(torchrun, _)] = recorded["torchrun"]
        rendezvous = f"--rdzv-endpoint node0:29500 --rdzv-id mtkit-train --rdzv-conf is_host={is_host}"
        assert "--nnodes 2 --nproc-per-node 2 --rdzv-backend c10d " + rendezvous in " ".join(torchrun)
        assert "--max-restarts 3 --no-python mtkit train" in " ".join(torchrun)
        for argv, _ in recorded["mtkit"]:
            assert parsed(argv)[1]["overrides"] == ["train.max_tokens=6250", "train.update_freq=1"]
    done, recorded = fake_cluster("torchrun-train.sh")
    assert done.returncode != 0 and "node number" in done.stderr and recorded["torchrun"] == []


def test_torchrun_backtranslate_gives_each_rank_a_gpu_and_a_shard(fake_cluster) -> None:
    done, recorded = fake_cluster("torchrun-backtranslate.sh", PROCS="2", CUDA_VISIBLE_DEVICES="4,6")
    assert done.returncode == 0, done.stderr
    [(torchrun, _)] = recorded["torchrun"]
    assert torchrun[-4:] == ["--no-python", "bash", str(CLUSTER / "torchrun-backtranslate.sh"), "--worker"]
    assert "--rdzv-endpoint localhost:29500" in " ".join(torchrun) and "is_host=1" in torchrun
    ranks = []
    for argv, environ in recorded["mtkit"]:
        command, params = parsed(argv)
        assert command == "back-translate" and params["shard"] is None
        ranks.append((shard(params, environ), environ["CUDA_VISIBLE_DEVICES"]))
    assert sorted(ranks) == [((1, 2), "4"), ((2, 2), "6")]


def test_plain_backtranslate_loop_takes_this_machines_shards(fake_cluster) -> None:
    done, recorded = fake_cluster("torchrun-backtranslate.sh", LAUNCHER="plain", NNODES="2", NODE_RANK="1", PROCS="2")
    assert done.returncode == 0, done.stderr
    assert recorded["torchrun"] == []
    runs = sorted((shard(parsed(argv)[1], env), env["CUDA_VISIBLE_DEVICES"]) for argv, env in recorded["mtkit"])
    assert runs == [((3, 4), "0"), ((4, 4), "1")]

    done, recorded = fake_cluster("torchrun-backtranslate.sh", LAUNCHER="plain", PROCS="2", DEVICE="cpu")
    assert done.returncode == 0, done.stderr
    for argv, environ in recorded["mtkit"]:
        assert "CUDA_VISIBLE_DEVICES" not in environ and int(environ["OMP_NUM_THREADS"]) >= 1
        assert parsed(argv)[1]["device"] == "cpu"

    done, recorded = fake_cluster("torchrun-backtranslate.sh", LAUNCHER="plain", PROCS="3", FAKE_FAIL="2/3")
    assert done.returncode == 1 and len(recorded["mtkit"]) == 3  # one shard failed: the others ran, the loop fails

    done, _ = fake_cluster("torchrun-backtranslate.sh", LAUNCHER="slurm")
    assert done.returncode == 2 and "torchrun or plain" in done.stderr
