"""The peer benchmark's wiring, without installing a peer: `make bench-peers` installs and prepares each peer with
the scripts in benchmarks/peers/ (markers that the scripts write and the train scenario reads) before it runs
the scenario; every script parses or compiles; nothing under benchmarks/ (recorded results aside) names a path
outside the repository."""

from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import ROOT

BENCHMARKS = ROOT / "benchmarks"
PEERS_DIR = BENCHMARKS / "peers"
# Places outside the clone: the directories beside it, a machine's own absolute paths, the parent of the root.
OUTSIDE = re.compile(r"shared/(bench|data)|\"shared\"|(?<![\w.$})])/(work|tmp|home|root|mnt|scratch)/|ROOT\.parent")
# A relative path that climbs: resolved against the file's own folder, it must stay in the clone.
CLIMB = re.compile(r"(?:\.\./)+[\w.-]*")
PARENTS = re.compile(r"__file__\)\.resolve\(\)\.parents\[(\d+)\]")


@pytest.fixture
def train(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    # benchmarks/run.py puts benchmarks/ first on the path: the scenarios import harness and flops as top level
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("scenarios.train")


def make_dry_run(target: str, peers: Path, tmp_path: Path) -> list[str]:
    if shutil.which("make") is None:
        pytest.skip("no make on this machine")
    installed = tmp_path / "venv-installed"  # stands for .venv/.installed: a dry run must not reach `make install`
    installed.touch()
    cmd = ["make", "-n", "--no-print-directory", target, f"PEERS={peers}", f"INSTALLED={installed}"]
    # under `make test` the parent make's flags (jobserver, -n, -k) would reach this make too
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True, env=env)
    return done.stdout.splitlines()


def outside_paths(text: str, place: Path) -> list[str]:
    """The places outside the repository that `text`, the content of the file at `place`, names."""
    found = [m.group(0) for m in OUTSIDE.finditer(text)]
    found += [
        m.group(0) for m in CLIMB.finditer(text) if not (place.parent / m.group(0)).resolve().is_relative_to(ROOT)
    ]
    depth = len(place.relative_to(ROOT).parents) - 1  # a file's parents[depth] is the repository root
    found += [m.group(0) for m in PARENTS.finditer(text) if int(m.group(1)) > depth]
    return found


def benchmark_files() -> list[Path]:
    return [
        path
        for path in sorted(BENCHMARKS.rglob("*"))
        if path.is_file()
        and path.suffix in {".py", ".sh", ".md"}
        and not path.is_relative_to(BENCHMARKS / "results")
        and "__pycache__" not in path.parts
    ]


def test_bench_peers_installs_and_prepares_each_peer_then_runs_the_train_scenario(
    train: ModuleType, tmp_path: Path
) -> None:
    lines = make_dry_run("bench-peers", tmp_path / "peers", tmp_path)
    assert lines[-1].endswith("benchmarks/run.py train --peers") and (BENCHMARKS / "run.py").is_file()
    for peer in train.PEER_NAMES:
        script = train.peer_script(peer).relative_to(ROOT)
        assert lines.index(f"bash {script} install") < lines.index(f"bash {script} prep") < len(lines) - 1
    for line in lines:
        for named in re.findall(r"benchmarks/peers/\S+", line):
            assert (ROOT / named).is_file(), f"`{line}` runs {named}, which is not in the repository"


def test_the_scripts_markers_are_what_make_and_the_train_scenario_look_for(train: ModuleType, tmp_path: Path) -> None:
    peers = tmp_path / "peers"
    for peer in train.PEER_NAMES:
        missing = train.peer_missing(peer, peers)
        assert "make bench-peers-install" in missing and str(train.peer_script(peer).relative_to(ROOT)) in missing
        script = train.peer_script(peer).read_text()
        assert 'touch "$VENV/.installed"' in script and 'touch "$RUN/.prepared"' in script
        assert f"VENV=${{VENV:-$PEERS/{peer}}}" in script and f"RUN=${{RUN:-$PEERS/runs/{peer}}}" in script
        # in the order the stages write them: prep's after install's, which make reads as up to date
        for marker in (peers / peer / ".installed", peers / "runs" / peer / ".prepared"):
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()
        assert train.peer_missing(peer, peers) is None
    lines = make_dry_run("bench-peers", peers, tmp_path)
    assert len(lines) == 1 and lines[0].endswith("benchmarks/run.py train --peers")


def test_the_train_scenario_runs_the_peers_from_the_repository(train: ModuleType) -> None:
    for peer in train.PEER_NAMES:
        assert train.peer_script(peer).is_file() and train.peer_script(peer).is_relative_to(PEERS_DIR)


def test_the_peer_scripts_find_their_helpers_and_the_data_in_the_repository(train: ModuleType) -> None:
    for peer in train.PEER_NAMES:
        text = train.peer_script(peer).read_text()
        assert 'HERE=$(cd "$(dirname "$0")" && pwd)' in text
        called = set(re.findall(r"\$HERE/([\w.]+)", text))
        assert called >= {"prep_data.sh", "benchutil.py"}
        assert [name for name in called if not (PEERS_DIR / name).is_file()] == []
    prep = (PEERS_DIR / "prep_data.sh").read_text()
    default = re.search(r'DATA=\$\{2:-\$\(cd "\$\(dirname "\$0"\)/([\w./]+)" && pwd\)\}', prep)
    data = (PEERS_DIR / default.group(1)).resolve()
    assert data == ROOT / "data" / "multi30k"
    assert all(
        (data / f"{split}.{lang}.gz").is_file()
        for split in ("train", "val", "test_2016_flickr")
        for lang in ("en", "de")
    )


@pytest.mark.parametrize("script", sorted(PEERS_DIR.glob("*.sh")), ids=lambda path: path.name)
def test_shell_scripts_parse(script: Path) -> None:
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_python_scripts_compile() -> None:
    scripts = sorted(PEERS_DIR.glob("*.py"))
    assert {path.name for path in scripts} >= {"benchutil.py", "fairseq_batches.py", "ct2_translate.py"}
    for path in scripts:
        compile(path.read_text(encoding="utf-8"), str(path), "exec")  # they import the peers: compiled, not run


def test_nothing_under_benchmarks_names_a_path_outside_the_repository() -> None:
    files = benchmark_files()
    assert PEERS_DIR / "README.md" in files and BENCHMARKS / "scenarios" / "train.py" in files
    named = {str(path.relative_to(ROOT)): outside_paths(path.read_text(encoding="utf-8"), path) for path in files}
    assert {path: found for path, found in named.items() if found} == {}


def test_the_outside_path_check_catches_what_it_is_for() -> None:
    peers, scenarios = PEERS_DIR / "prep_data.sh", BENCHMARKS / "scenarios" / "train.py"
    # joined from parts, so that a grep of the repository for such paths finds none in this file
    beside, machine = "/".join(("..", "shared", "bench", "peers")), "/".join(("", "work", "shared", "data"))
    cases = [
        ('PEER_SCRIPTS = ROOT.parent / "shared" / "bench" / "peers"', scenarios, True),
        (f'SOURCES = (ROOT / "data", Path("{machine}/multi30k"))', scenarios, True),
        (f"B={beside}", peers, True),
        ('DATA=$(cd "$(dirname "$0")/../../../data" && pwd)', peers, True),
        ("HERE = Path(__file__).resolve().parents[3]", scenarios, True),
        ('DATA=$(cd "$(dirname "$0")/../../data/multi30k" && pwd)', peers, False),
        ("ROOT = Path(__file__).resolve().parents[2]", scenarios, False),
        ("/usr/bin/time -v -o A.time; PEERS=${PEERS:-$HOME/.cache/mtkit-peers}", peers, False),
    ]
    for text, place, outside in cases:
        assert bool(outside_paths(text, place)) == outside, (text, place)
