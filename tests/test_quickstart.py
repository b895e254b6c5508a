"""The documents' commands cannot go stale: README.md's quick start runs exactly as printed, and the command
options and recipe keys that README.md and docs/ show exist (their links, files, tests and make targets:
tests/test_docs.py).

The quick start's commands (the ```bash blocks between `<!-- quickstart -->` and `<!-- /quickstart -->`) run
unchanged, each through `bash -o pipefail -c`, with the virtual environment's `mtkit` first on PATH, in a
temporary directory laid out as the repository is. Two files there are substituted, nothing in the commands:
`data/multi30k/` holds the first lines of the shipped data (2,000 train, 100 valid, 50 test pairs), and
`recipes/multi30k-en-de/small.toml` is a tiny recipe of the same sections and keys (the `tiny` model, vocabulary
1,000, 30 updates with a checkpoint every 10), so the five commands take seconds, not the recipe's 15 minutes.
A renamed option, command or recipe key makes a command fail, and so this test.
"""

from __future__ import annotations

import gzip
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import MULTI30K, ROOT, read_gz_lines

README = ROOT / "README.md"
DOCS = ROOT / "docs"
RECIPE = "recipes/multi30k-en-de/small.toml"
SLICES = {"train": 2000, "val": 100, "test_2016_flickr": 50}
TINY_RECIPE = """\
# The quick-start test's stand-in for recipes/multi30k-en-de/small.toml: the same sections, a tiny model.
[preprocess]
source_lang = "en"
target_lang = "de"
train = "data/multi30k/train"
valid = "data/multi30k/val"
test = ["data/multi30k/test_2016_flickr"]
vocab_size = 1000
workers = 1

[model]
arch = "tiny"

[train]
precision = "fp32"
lr = 3e-3
warmup_steps = 10
max_tokens = 2048
max_steps = 30
save_interval_minutes = 0.0
save_interval_steps = 10
average_last = 3
log_interval = 10

[translate]
beam = 4
"""


def quickstart_commands(text: str) -> list[str]:
    """The shell commands of the ```bash blocks between the quick-start markers, continuation lines joined."""
    start, end = text.index("<!-- quickstart -->"), text.index("<!-- /quickstart -->")
    blocks = re.findall(r"```bash\n(.*?)```", text[start:end], flags=re.S)
    commands: list[str] = []
    for block in blocks:
        joined = block.replace("\\\n", " ")
        commands += [line.strip() for line in joined.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return commands


def test_the_quickstart_block_is_found_and_has_the_five_steps() -> None:
    commands = quickstart_commands(README.read_text(encoding="utf-8"))
    for step in ("preprocess", "train", "average", "translate", "score"):
        assert any(f"mtkit {step} " in command for command in commands), f"README quick start: no `mtkit {step}`"


def write_tiny_checkout(root: Path) -> None:
    """data/multi30k slices and the tiny recipe, where the quick start's relative paths look for them."""
    data = root / "data" / "multi30k"
    data.mkdir(parents=True)
    for split, count in SLICES.items():
        for lang in ("en", "de"):
            lines = read_gz_lines(MULTI30K / f"{split}.{lang}.gz", count)
            with gzip.open(data / f"{split}.{lang}.gz", "wt", encoding="utf-8", newline="\n") as handle:
                handle.write("\n".join(lines) + "\n")
    recipe = root / RECIPE
    recipe.parent.mkdir(parents=True)
    recipe.write_text(TINY_RECIPE, encoding="utf-8")


def test_quickstart_runs_as_printed(tmp_path: Path) -> None:
    commands = quickstart_commands(README.read_text(encoding="utf-8"))
    write_tiny_checkout(tmp_path)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    outputs = []
    for command in commands:
        done = subprocess.run(
            ["bash", "-o", "pipefail", "-c", command],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, f"README quick start: `{command}` exited {done.returncode}:\n{done.stderr[-3000:]}"
        outputs.append(done.stdout + done.stderr)
    assert "BLEU = " in outputs[-1] and "signature: nrefs:1" in outputs[-1], outputs[-1]


def documents() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def shown_options() -> dict[str, set[str]]:
    """Subcommand -> the `--options` given to it in the ```bash blocks of README.md and docs/."""
    options: dict[str, set[str]] = {}
    for doc in documents():
        for block in re.findall(r"```bash\n(.*?)```", doc.read_text(encoding="utf-8"), flags=re.S):
            for line in block.replace("\\\n", " ").splitlines():
                line = re.sub(r"(^|\s)#.*", "", line)  # a comment's words are not a command
                for command, rest in re.findall(r"\bmtkit ([\w-]+)([^|;&]*)", line):
                    options.setdefault(command, set()).update(re.findall(r"(?<![\w-])--[a-z][\w-]*", rest))
    return options


def test_every_option_the_documents_show_exists() -> None:
    """Each `mtkit COMMAND ... --option` of a command block in README.md or docs/ is in `mtkit COMMAND --help` (the
    help as a terminal shows it, made in this process: test_help_lists_every_command_without_importing_torch of
    tests/cli/test_main.py runs the real `mtkit --help`)."""
    from typer.testing import CliRunner

    from mtkit.cli.main import app

    env = {"COLUMNS": "250", "TERM": "dumb", "NO_COLOR": "1"}
    missing = []
    for command, options in sorted(shown_options().items()):
        help_text = CliRunner().invoke(app, [command, "--help"], env=env).stdout
        assert "Usage" in help_text, f"mtkit {command}: no such command"
        # A command of subcommands (`mtkit memory import ...`): an option shown may be any subcommand's.
        for sub in (
            re.findall(r"^│ (\w[\w-]*) ", help_text.split("Commands")[-1], re.M) if "Commands" in help_text else []
        ):
            help_text += CliRunner().invoke(app, [command, sub, "--help"], env=env).stdout
        missing += [
            f"mtkit {command} {option}"
            for option in sorted(options)
            if not re.search(re.escape(option) + r"(?![\w-])", help_text)
        ]
    assert not missing, "options shown in the documents but not in --help:\n" + "\n".join(missing)


def test_every_recipe_override_the_documents_show_is_a_valid_key() -> None:
    """Each `--set section.key=value` in README.md or docs/ names a recipe key and a value of its type."""
    from mtkit.recipe import resolve_recipe

    shown = {
        match
        for doc in documents()
        for match in re.findall(r"--set ([a-z_]+\.\w+=[^\s`),]+)", doc.read_text(encoding="utf-8"))
    }
    for override in sorted(shown - {"section.key=value"}):
        resolve_recipe(None, "tiny", [override], vocab_size=1000)  # a UserError names the bad key or value
