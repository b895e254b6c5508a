"""The documents cannot go stale: in every Markdown file git tracks (but the reports of benchmark runs,
SKIPPED), each relative link reaches a file and each `#anchor` a heading of it, by GitHub's anchor rules, as does
each section cited in prose (`BENCHMARKS.md, "Training"`); each benchmark script, benchmark scenario, make target,
test, test function and mtkit module or name a document names exists; and README.md's results table quotes
BENCHMARKS.md, figure for figure.

A script that has since been removed is named with the commit that holds it, as git spells it
(`56de2fc:benchmarks/bench_train.py`): the document may then name the bare path too, and git is asked whether that
commit holds that file. tests/test_quickstart.py runs README.md's commands and checks the options and recipe keys
the documents show.
"""

from __future__ import annotations

import ast
import functools
import re
import subprocess
from collections import Counter
from pathlib import Path
from urllib.parse import unquote

import pytest

from tests.conftest import ROOT

# Reports the benchmark harness writes, each quoting the commands and code of its own day, and the peers' results
# as their run wrote them.
SKIPPED = ("benchmarks/results/", "benchmarks/peers/RESULTS.md")

FENCE = r"^[ \t]*(```|~~~)[^\n]*\n.*?^[ \t]*\1[ \t]*$"
FENCED = re.compile(FENCE, flags=re.M | re.S)
CODE = re.compile(FENCE + r"|`[^`\n]+`", flags=re.M | re.S)
HEADING = re.compile(r"^(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$", flags=re.M)
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
# A section cited in prose: BENCHMARKS.md, "Demo on each kind of CPU" or README.md, section GPUs.
CITED = re.compile(r"(?<![\w./-])([\w./-]+\.md),\s+(?:\"([^\"]+)\"|section\s+([A-Z][\w'-]*(?:[ \t]+[A-Z][\w'-]*)*))")
SCHEME = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*:")
# A path starts a word: not the `results/x` of `benchmarks/results/x`, nor the `mtkit/` of `../mtkit/`.
BENCHMARK_FILE = re.compile(r"(?<![\w./-])benchmarks/[\w./*{},+-]+")
SCENARIO = re.compile(r"(?<![\w./-])benchmarks/run\.py\s+([a-z][\w-]*)")
PACKAGE_PATH = re.compile(r"(?<![\w./-])(?:tests|mtkit)/[\w./+-]*")
TEST_FILE = re.compile(r"(?<![\w./-])((?:[\w-]+/)*test_\w+\.py)")
TEST_NAME = re.compile(r"(?<![\w./-])((?:[\w-]+/)*test_\w+\.py)?::(\w+)")
DOTTED = re.compile(r"(?<![\w./-])mtkit(?:\.[A-Za-z_]\w*)+")
ROOTS = ("tests/", "mtkit/", "benchmarks/")  # the paths that begin at the repository's root
FILE_SUFFIXES = {"json", "toml", "md", "txt", "py", "egg"}  # mtkit.json is a file an export writes, not a module
MAKE = re.compile(r"(?<![\w$-])make[ \t]+(?:[A-Z_]+=\S*[ \t]+)*([a-z][\w-]*)")
AT_COMMIT = re.compile(r"(?<![\w/])([0-9a-f]{7,40}):((?:[\w.+-]+/)*[\w.+-]+\.\w+)")
NUMBER = re.compile(r"(?<![\w.,])\d+(?:,\d{3})*(?:\.\d+)?")
DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
COMMIT = re.compile(r"\b(?=[0-9a-f]*\d)[0-9a-f]{7,40}(?:\+dirty)?(?![\w+])")


def documents(root: Path = ROOT) -> list[Path]:
    """The Markdown files git tracks (all under `root` outside a git checkout), the harness's reports left out."""
    listed = subprocess.run(["git", "ls-files", "-z", "*.md"], cwd=root, capture_output=True, text=True)
    if listed.returncode == 0:
        names = listed.stdout.split("\0")
    else:
        names = [str(p.relative_to(root)) for p in root.rglob("*.md")]
        names = [name for name in names if not any(part.startswith(".") for part in Path(name).parts)]
    return sorted(root / name for name in names if name and not name.startswith(SKIPPED) and (root / name).is_file())


def blank(match: re.Match[str]) -> str:
    """The match as spaces, its newlines kept: what is left keeps its offsets and line numbers."""
    return re.sub(r"[^\n]", " ", match.group())


def prose(text: str) -> str:
    """The text with its code (fenced blocks and inline spans) blanked: GitHub renders no link or heading there."""
    return CODE.sub(blank, text)


def code(text: str) -> str:
    """The text with all but its code blanked: the commands a reader is shown."""
    kept, end = [], 0
    for match in CODE.finditer(text):
        kept += [re.sub(r"[^\n]", " ", text[end : match.start()]), match.group()]
        end = match.end()
    return "".join([*kept, re.sub(r"[^\n]", " ", text[end:])])


def where(doc: Path, root: Path, text: str, offset: int) -> str:
    return f"{doc.relative_to(root)}:{text.count(chr(10), 0, offset) + 1}"


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: the text as rendered (a link's text, no markup), lower case, every character
    but letters, digits, `-`, `_` and spaces dropped, each space a `-`."""
    rendered = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip())
    return re.sub(r"[^\w\- ]", "", rendered.lower()).replace(" ", "-")


def headings(text: str) -> list[tuple[int, int, str]]:
    """(offset, level, anchor) of each heading outside fenced code; a repeated heading's anchor is suffixed -1, -2,
    ... as GitHub does."""
    seen: Counter[str] = Counter()
    found = []
    for match in HEADING.finditer(FENCED.sub(blank, text)):
        base = slug(match.group(2))
        found.append((match.start(), len(match.group(1)), f"{base}-{seen[base]}" if seen[base] else base))
        seen[base] += 1
    return found


@functools.cache
def anchors(path: Path) -> frozenset[str]:
    return frozenset(anchor for _, _, anchor in headings(path.read_text(encoding="utf-8")))


def broken_links(doc: Path, root: Path = ROOT) -> list[str]:
    """Each relative link of `doc` that reaches no file in the repository, or no heading of a Markdown file."""
    text = doc.read_text(encoding="utf-8")
    broken = []
    for match in LINK.finditer(prose(text)):
        target = match.group(1)
        if not target or SCHEME.match(target):  # http(s), mailto: the outside world, not checked here
            continue
        file, _, fragment = unquote(target).partition("#")
        path = ((root / file.lstrip("/")) if file.startswith("/") else (doc.parent / file)).resolve() if file else doc
        at = where(doc, root, text, match.start())
        if not path.is_relative_to(root.resolve()):
            broken.append(f"{at}: {target}: outside the repository")
        elif not path.exists():
            broken.append(f"{at}: {target}: no such file")
        elif fragment and path.suffix == ".md" and fragment not in anchors(path):
            broken.append(f"{at}: {target}: no heading #{fragment} in {path.relative_to(root.resolve())}")
    for match in CITED.finditer(prose(text)):
        name, heading = match.group(1), " ".join((match.group(2) or match.group(3)).split())
        path = next((p for p in (doc.parent / name, root / name) if p.is_file()), None)
        if path is None or slug(heading) not in anchors(path.resolve()):
            broken.append(f"{where(doc, root, text, match.start())}: {name}, {heading!r}: no such section")
    return broken


@functools.cache
def make_targets(root: Path) -> frozenset[str]:
    rules = re.findall(r"^([^\s:=#$][^:=#\n]*?):(?!=)", (root / "Makefile").read_text(encoding="utf-8"), flags=re.M)
    return frozenset(name for rule in rules for name in rule.split())


@functools.cache
def scenarios(root: Path) -> frozenset[str]:
    """The scenarios benchmarks/run.py's SCENARIOS names, each with its module in benchmarks/scenarios/, and `all`."""
    tree = ast.parse((root / "benchmarks" / "run.py").read_text(encoding="utf-8"))
    names = {
        key.value
        for node in tree.body
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "SCENARIOS" for t in node.targets)
        for key in getattr(node.value, "keys", [])
        if isinstance(key, ast.Constant)
    }
    return frozenset({"all"} | {name for name in names if (root / "benchmarks" / "scenarios" / f"{name}.py").exists()})


@functools.cache
def top_level_names(module: Path) -> frozenset[str]:
    """What a module defines at its top level: functions, classes, assigned names."""
    names = set()
    for node in ast.parse(module.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return frozenset(names)


def dotted_name_exists(dotted: str, root: Path) -> bool:
    """`mtkit.a.b` is a package or module; `mtkit.a.b.name` (or `name.attribute`) a name module a.b defines."""
    path, parts = root / "mtkit", dotted.split(".")[1:]
    for index, part in enumerate(parts):
        if (path / part).is_dir():
            path = path / part
        elif (path / f"{part}.py").is_file():
            rest = parts[index + 1 :]
            return not rest or rest[0] in top_level_names(path / f"{part}.py")
        else:
            return False
    return True


def exists(path: str, root: Path) -> bool:
    """A path, a glob (`x.*`) or a brace list (`x.{json,md}`) that names at least one file of the repository."""
    brace = re.search(r"\{([^{}]*)\}", path)
    if brace:
        options = brace.group(1).split(",")
        return all(exists(path[: brace.start()] + option + path[brace.end() :], root) for option in options)
    return any(root.glob(path)) if "*" in path else (root / path).exists()


def missing_names(doc: Path, root: Path = ROOT) -> list[str]:
    """The benchmark files and scenarios, make targets, tests and mtkit modules and names `doc` names that do not
    exist. A path also named as COMMIT:PATH is where that commit holds it (test_files_named_at_a_commit_are_there)."""
    text = doc.read_text(encoding="utf-8")
    shown = code(text)
    at_commit = {path for _, path in AT_COMMIT.findall(text)}
    missing = []

    def report(match: re.Match[str], what: str) -> None:
        missing.append(f"{where(doc, root, text, match.start())}: {what}")

    for match in BENCHMARK_FILE.finditer(text):  # files only: a folder named as a plan has no file to check
        path = match.group().rstrip(".,;:")
        if re.search(r"\.[\w*{},]+$", path) and path not in at_commit and not exists(path, root):
            report(match, f"{path}: no such file")
    for match in SCENARIO.finditer(text):
        if match.group(1) not in scenarios(root):
            report(match, f"benchmarks/run.py {match.group(1)}: no such scenario in benchmarks/run.py's SCENARIOS")
    for match in PACKAGE_PATH.finditer(text):
        path = match.group().rstrip(".,;:")
        if path not in at_commit and not exists(path, root):
            report(match, f"{path}: no such file or folder")
    for match in TEST_FILE.finditer(text):  # `reliability/test_x.py` in a page that says names are under tests/
        path = f"tests/{match.group(1)}"
        if not match.group(1).startswith(ROOTS) and path not in at_commit and not (root / path).is_file():
            report(match, f"{match.group(1)}: no such test file under tests/")
    current = None
    for match in TEST_NAME.finditer(text):
        file = match.group(1)
        current = (file if file.startswith("tests/") else f"tests/{file}") if file else current
        test = root / current if current else None
        if test is None or not test.is_file() or not re.search(rf"def {match.group(2)}\b", test.read_text("utf-8")):
            report(match, f"{current}::{match.group(2)}: no such test")
    for match in DOTTED.finditer(text):
        name = match.group()
        if name.rsplit(".", 1)[1] not in FILE_SUFFIXES and not dotted_name_exists(name, root):
            report(match, f"{name}: no such module or name in mtkit/")
    for match in MAKE.finditer(shown):
        if match.group(1) not in make_targets(root):
            report(match, f"make {match.group(1)}: no such target in the Makefile")
    return missing


def test_links_reach_a_file_and_a_heading() -> None:
    broken = [problem for doc in documents() for problem in broken_links(doc)]
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_scripts_scenarios_targets_tests_and_modules_the_documents_name_exist() -> None:
    missing = [problem for doc in documents() for problem in missing_names(doc)]
    assert not missing, "named in the documents but not found:\n" + "\n".join(missing)


def test_files_named_at_a_commit_are_there() -> None:
    """Each COMMIT:PATH a document names is a file of that commit, so `git show COMMIT:PATH` prints it."""
    refs = sorted({"{}:{}".format(*ref) for doc in documents() for ref in AT_COMMIT.findall(doc.read_text("utf-8"))})
    history = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=ROOT, capture_output=True, text=True)
    if history.returncode != 0 or history.stdout.strip() != "false":
        pytest.skip("no full git history here to look the commits up in")
    found = subprocess.run(
        ["git", "cat-file", "--batch-check"], cwd=ROOT, input="\n".join(refs) + "\n", capture_output=True, text=True
    )
    absent = [ref for ref, answer in zip(refs, found.stdout.splitlines()) if answer.endswith("missing")]
    assert refs, "no document names a file at a commit: BENCHMARKS.md's removed scripts were not found"
    assert not absent, "no such file at that commit:\n" + "\n".join(absent)


def section(text: str, anchor: str) -> str:
    """The part of a Markdown text under the heading of `anchor`, down to the next heading of its level or above;
    with every line elsewhere that links to that anchor (a summary table's row)."""
    found = headings(text)
    for index, (start, level, name) in enumerate(found):
        if name == anchor:
            end = next((s for s, lv, _ in found[index + 1 :] if lv <= level), len(text))
            links = [line for line in text.splitlines() if f"](#{anchor})" in line]
            return "\n".join([text[start:end], *links])
    return ""


def quoted(value: str, source: str) -> bool:
    """`value` stands in `source` whole: a number not as part of a longer one (1.3 is not in 1.34), a commit not as
    part of another stamp (7f57fba is not 7f57fba+dirty)."""
    after = r"(?!\d|[.,]\d)" if NUMBER.fullmatch(value) else r"(?![\w+])"
    return re.search(rf"(?<![\w.,]){re.escape(value)}{after}", source) is not None


def machines(benchmarks: str) -> set[str]:
    """The machines BENCHMARKS.md's first table names (its rows' first cells in bold): Zen 4, Xeon, ..."""
    return set(re.findall(r"^\| \*\*([^*|]+)\*\* \|", benchmarks, flags=re.M))


def results_table_problems(readme: str, benchmarks: str) -> list[str]:
    """Each row of README.md's results table links to its BENCHMARKS.md section, and its figures, date, commit and
    machine (one of BENCHMARKS.md's) stand in that section (or in the summary row that links to it)."""
    results = section(readme, "results")
    rows = [line for line in results.splitlines() if line.startswith("|") and not line.startswith("|---")][1:]
    problems = [] if rows else ["README.md: no results table under ## Results"]
    for row in rows:
        what, figure, stamp, machine = ([*(cell.strip() for cell in row.strip("|").split("|")), "", "", ""])[:4]
        link = re.search(r"\]\(BENCHMARKS\.md#([\w-]+)\)", what)
        source = section(benchmarks, link.group(1)) if link else ""
        if not link or not source:
            problems.append(f"README.md results, {what!r}: no link to a section of BENCHMARKS.md")
            continue
        label = f"README.md results, row of BENCHMARKS.md#{link.group(1)}"
        figures = NUMBER.findall(re.sub(r"\]\([^)]*\)", "]", figure))
        if figures and not (DATE.search(stamp) and COMMIT.search(stamp)):
            problems.append(f"{label}: a figure without its date and commit")
        named = next((m for m in sorted(machines(benchmarks), key=len, reverse=True) if machine.startswith(m)), None)
        if figures and not (named and named in source):
            problems.append(f"{label}: machine {machine!r} is not one BENCHMARKS.md names there")
        problems += [
            f"{label}: {value} is not there"
            for value in [*figures, *DATE.findall(stamp), *COMMIT.findall(stamp)]
            if not quoted(value, source)
        ]
    return problems


def test_readmes_results_are_benchmarks_figures() -> None:
    benchmarks = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    assert {"Zen 4", "Xeon"} <= machines(benchmarks), "BENCHMARKS.md: its table of machines was not found"
    problems = results_table_problems((ROOT / "README.md").read_text(encoding="utf-8"), benchmarks)
    assert not problems, "\n".join(problems)


def test_github_anchors() -> None:
    assert slug("CTranslate2's own search") == "ctranslate2s-own-search"
    assert slug("GET /health and GET /info") == "get-health-and-get-info"
    assert slug("`mtkit serve`: a [page](x.md) and_more") == "mtkit-serve-a-page-and_more"


def fake_repository(root: Path) -> None:
    (root / "docs").mkdir()
    (root / "docs" / "target.md").write_text("# Target\n\n## Twice\n\n## Twice\n\n```bash\n# not a heading\n```\n")
    (root / "Makefile").write_text(".PHONY: demo\n# a comment: not a target\ndemo: install\n\techo\n")
    (root / "benchmarks" / "scenarios").mkdir(parents=True)
    (root / "benchmarks" / "run.py").write_text('SCENARIOS = {"train": None, "gone": None}\n')
    (root / "benchmarks" / "scenarios" / "train.py").write_text("")
    (root / "tests").mkdir()
    (root / "tests" / "test_x.py").write_text("def test_one() -> None: ...\n")
    (root / "mtkit" / "engines").mkdir(parents=True)
    (root / "mtkit" / "engines" / "factory.py").write_text("def load_translator() -> None: ...\nLIMIT = 1\n")


def test_the_checks_report_what_is_broken(tmp_path: Path) -> None:
    fake_repository(tmp_path)
    doc = tmp_path / "README.md"
    doc.write_text(
        "# Top\n\n"
        "[fine](docs/target.md#twice-1), [here](#top), [web](https://example.com/x#y), `[code](nowhere.md)`\n"
        "[gone](docs/missing.md) and [no heading](docs/target.md#nowhere)\n"
        "[a code comment](docs/target.md#not-a-heading), [third](docs/target.md#twice-2)\n"
        "`make demo`, `make nowhere`; to make sense of it (prose); `python benchmarks/run.py train --small`\n"
        "`python benchmarks/run.py gone`, `benchmarks/bench_old.py`, `abc1234:benchmarks/bench_kept.py` and\n"
        "`python benchmarks/bench_kept.py`; tests/test_x.py::test_one, ::test_two, tests/test_y.py\n"
        "`mtkit.engines.factory.load_translator`, mtkit.engines.factory.LIMIT, mtkit.engines.gone, mtkit.json,\n"
        "mtkit/engines/factory.py, mtkit/translate.py, test_x.py, gone/test_z.py\n"
        'as docs/target.md, "Twice" says (docs/target.md, "Gone" and docs/target.md, section Target Lost do not)\n'
    )
    assert broken_links(doc, tmp_path) == [
        "README.md:4: docs/missing.md: no such file",
        "README.md:4: docs/target.md#nowhere: no heading #nowhere in docs/target.md",
        "README.md:5: docs/target.md#not-a-heading: no heading #not-a-heading in docs/target.md",
        "README.md:5: docs/target.md#twice-2: no heading #twice-2 in docs/target.md",
        "README.md:11: docs/target.md, 'Gone': no such section",
        "README.md:11: docs/target.md, 'Target Lost': no such section",
    ]
    assert sorted(missing_names(doc, tmp_path)) == [
        "README.md:10: gone/test_z.py: no such test file under tests/",
        "README.md:10: mtkit/translate.py: no such file or folder",
        "README.md:6: make nowhere: no such target in the Makefile",
        "README.md:7: benchmarks/bench_old.py: no such file",
        "README.md:7: benchmarks/run.py gone: no such scenario in benchmarks/run.py's SCENARIOS",
        "README.md:8: tests/test_x.py::test_two: no such test",
        "README.md:8: tests/test_y.py: no such file or folder",
        "README.md:9: mtkit.engines.gone: no such module or name in mtkit/",
    ]


def test_the_results_check_reports_a_figure_benchmarks_lacks() -> None:
    benchmarks = (
        "| machine | what |\n|---|---|\n| **Zen 4** | a CPU |\n\n| [serving](#serving) | 1.34x in 0.65x the RSS |\n\n"
        "## Serving\n\n**Zen 4, 2026-11-25.** (code at 7f57fba+dirty)\n\n## Next\n\n0.21x\n"
    )
    readme = (
        "# mtkit\n\n## Results\n\n| what | figure | date, commit | machine |\n|---|---|---|---|\n"
        "| serving ([Serving](BENCHMARKS.md#serving)) | {} | {} | Zen 4 |\n\n## Next\n"
    )
    row = "README.md results, row of BENCHMARKS.md#serving"
    assert results_table_problems(readme.format("1.34x, 0.65x the RSS", "2026-11-25, 7f57fba+dirty"), benchmarks) == []
    assert results_table_problems(readme.format("1.34x, 0.21x the RSS", "2026-11-25, 7f57fba"), benchmarks) == [
        f"{row}: 0.21 is not there",
        f"{row}: 7f57fba is not there",
    ]
    assert results_table_problems(readme.format("1.34x", ""), benchmarks) == [
        f"{row}: a figure without its date and commit"
    ]
    assert results_table_problems(
        readme.format("1.34x", "2026-11-25, 7f57fba+dirty").replace("Zen 4 |", "Xeon |"), benchmarks
    ) == [f"{row}: machine 'Xeon' is not one BENCHMARKS.md names there"]


TABLE_ROW = re.compile(r"^\|\s*([^|]+?)\s*\|\s*([^|]*?)\s*\|", flags=re.M)


def package_table(architecture: str) -> dict[str, list[str]]:
    """docs/architecture.md's table of the packages, from the bottom: each part (`model/`, or a group of top-level
    modules such as basics) -> the modules its row names, in its order."""
    table = section(architecture, "the-packages-from-the-bottom")
    rows = {}
    for part, names in TABLE_ROW.findall(table):
        if part not in ("part", "---"):
            rows[part.strip("`")] = re.findall(r"`([\w.]+)`", names)
    return rows


def documented_modules(rows: dict[str, list[str]]) -> set[str]:
    """The dotted names the table covers: a package's row `x/` with `m` means x.m, any other row a module of mtkit/."""
    return {f"{part[:-1]}.{name}" if part.endswith("/") else name for part, names in rows.items() for name in names}


def undocumented(package: Path, rows: dict[str, list[str]]) -> list[str]:
    """Each package and module under `package` that the table has no row or mention for, and each mention of
    something that is not there."""
    found = set()
    for path in package.rglob("*.py"):
        parts = path.relative_to(package).with_suffix("").parts
        if parts[-1] != "__init__":
            found.add(".".join(parts))
    packages = {path.parent.relative_to(package).as_posix() for path in package.rglob("*/__init__.py")}
    documented = documented_modules(rows)
    return sorted(
        [f"mtkit/{name}/: no row in docs/architecture.md" for name in packages if f"{name}/" not in rows]
        + [f"mtkit.{name}: not in docs/architecture.md's package table" for name in found - documented]
        + [f"mtkit.{name}: in docs/architecture.md's package table, not in mtkit/" for name in documented - found]
    )


def readme_packages(readme: str) -> list[str]:
    """The subpackages README.md lists, in its order."""
    listed = re.search(r"grouped by role into\s+subpackages \(([^)]*)\)", readme)
    return re.findall(r"`(\w+/)`", listed.group(1)) if listed else []


def test_architecture_has_a_row_for_every_package_and_module() -> None:
    rows = package_table((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"))
    assert rows, "docs/architecture.md: no table under 'The packages, from the bottom'"
    assert undocumented(ROOT / "mtkit", rows) == []


def test_readmes_package_list_is_the_architectures() -> None:
    rows = package_table((ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"))
    assert readme_packages((ROOT / "README.md").read_text(encoding="utf-8")) == [p for p in rows if p.endswith("/")]


def test_the_package_table_check_reports_what_is_missing(tmp_path: Path) -> None:
    (tmp_path / "engines").mkdir()
    for name in ("errors.py", "engines/__init__.py", "engines/ct2.py", "engines/factory.py", "__main__.py"):
        (tmp_path / name).write_text("")
    architecture = (
        "# A\n\n## The packages, from the bottom\n\n| part | modules | what it owns |\n|---|---|---|\n"
        "| basics | `errors`, `gone` | ... |\n| `engines/` | `ct2` | the `Decoding` interface |\n\n## Next\n\n"
        "| `cli/` | `main` | elsewhere |\n"
    )
    assert undocumented(tmp_path, package_table(architecture)) == [
        "mtkit.__main__: not in docs/architecture.md's package table",
        "mtkit.engines.factory: not in docs/architecture.md's package table",
        "mtkit.gone: in docs/architecture.md's package table, not in mtkit/",
    ]
    assert undocumented(tmp_path, package_table(architecture.replace("| `engines/` | `ct2` |", "| x | `ct2` |"))) == [
        "mtkit.__main__: not in docs/architecture.md's package table",
        "mtkit.ct2: in docs/architecture.md's package table, not in mtkit/",
        "mtkit.engines.ct2: not in docs/architecture.md's package table",
        "mtkit.engines.factory: not in docs/architecture.md's package table",
        "mtkit.gone: in docs/architecture.md's package table, not in mtkit/",
        "mtkit/engines/: no row in docs/architecture.md",
    ]
    assert readme_packages("are grouped by role into\nsubpackages (`model/`, `cli/`) that") == ["model/", "cli/"]
