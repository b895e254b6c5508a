"""The machine's own gettext catalogs as a corpus (`mtkit collect-catalogs`): each package's compiled catalog of one
language (LOCALE_DIR/<lang>[_REGION]/LC_MESSAGES/PKG.mo) copied into OUT/train/, OUT/valid/ or OUT/test/ by package,
so that no held-out package has entries in training (a package's catalogs repeat their own strings), the held-out
pairs also as line files to translate and score, and OUT/catalogs.json. Picks and copies; reading is
mtkit.corpus.translation_files'.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mtkit.console import progress
from mtkit.corpus.translation_files import LANGUAGE_CODE, PairCounts, base_language, read_pairs
from mtkit.errors import check
from mtkit.files import atomic_write

SPLITS = ("train", "valid", "test")
SUMMARY_NAME = "catalogs.json"
DPKG_DIR = Path("/var/lib/dpkg")  # which Debian package installed each catalog
LINES_DIR = "lines"  # OUT/lines/valid.en, OUT/lines/test.de ...: the held-out pairs as mtkit translate/score read them


@dataclass
class CatalogsConfig:
    """What `mtkit collect-catalogs` collects, each field one of its options."""

    target_lang: str = field(default="de", metadata={"help": "The catalogs' language, e.g. de (de_DE, de_AT too)."})
    source_lang: str = field(
        default="en", metadata={"help": "The language the programs' own strings (msgid) are written in."}
    )
    locale_dir: str = field(
        default="",
        metadata={"help": "Where the catalogs lie (default: the system's, /usr/share/locale on Debian and Ubuntu)."},
    )
    valid_packages: int = field(default=5, metadata={"help": "Packages held out for validation."})
    test_packages: int = field(default=5, metadata={"help": "Packages held out for the test set."})

    def __post_init__(self) -> None:
        check(
            LANGUAGE_CODE.match(self.target_lang) is not None, f"target_lang: {self.target_lang!r} is no language code"
        )
        self.target_lang = base_language(self.target_lang)  # de_AT: German, its regional folders taken as well
        check(self.source_lang != self.target_lang, "source_lang and target_lang must differ")
        check(self.valid_packages >= 0, f"valid_packages must be 0 or more, got {self.valid_packages}")
        check(self.test_packages >= 0, f"test_packages must be 0 or more, got {self.test_packages}")


def default_locale_dir() -> Path:
    """The system's locale directory: where distributions install packages' catalogs (FHS: /usr/share/locale),
    else the Python prefix's (the stdlib gettext's default, e.g. a conda or Homebrew prefix), else the venv's."""
    candidates = [
        Path("/usr/share/locale"),
        Path(sys.base_prefix, "share", "locale"),
        Path(sys.prefix, "share", "locale"),
    ]
    return next((path for path in candidates if path.is_dir()), candidates[0])


def find_catalogs(locale_dir: Path, lang: str) -> dict[str, Path]:
    """Catalog (text domain) -> its file of `lang` (de, or de_AT: the same): LANG/LC_MESSAGES/DOMAIN.mo, else the
    first regional folder's (de_AT, de_DE, in sorted order); a variant (sr@latin) is another script or style and
    never taken, a link to a catalog taken already neither."""
    found: dict[str, Path] = {}
    lang = base_language(lang)
    folders = (
        [p for p in sorted(locale_dir.iterdir()) if p.is_dir() and "@" not in p.name] if locale_dir.is_dir() else []
    )
    ours = [p for p in folders if base_language(p.name) == lang]
    seen: set[Path] = set()
    for folder in sorted(ours, key=lambda p: (p.name.lower() != lang, p.name)):
        # A catalog linked under a second name (iso_3166.mo -> iso_3166-1.mo) is the same text: taken once.
        for catalog in sorted((folder / "LC_MESSAGES").glob("*.mo"), key=lambda p: (p.is_symlink(), p.name)):
            if catalog.stem not in found and catalog.resolve() not in seen:
                found[catalog.stem] = catalog
                seen.add(catalog.resolve())
    return found


def package_of(catalogs: dict[str, Path], dpkg_dir: Path = DPKG_DIR) -> dict[str, str]:
    """Catalog (text domain) -> the package it is held out with: the source package of the Debian package that
    installed it, from dpkg's file lists and status (postgres-15 and psql-15 are both postgresql-15's, iso_639 and
    iso_3166 iso-codes', ld and gprof binutils'); the domain itself where dpkg owns none (no dpkg, a copied folder)."""
    wanted = {str(path): domain for domain, path in catalogs.items()}
    binary: dict[str, str] = {}
    for listing in sorted((dpkg_dir / "info").glob("*.list")):
        for line in listing.read_text(encoding="utf-8", errors="replace").splitlines():
            if line in wanted:
                binary[wanted[line]] = listing.stem.split(":")[0]  # libpq5:amd64.list -> libpq5
    source = _source_packages(dpkg_dir / "status") if binary else {}
    return {domain: source.get(binary.get(domain, ""), binary.get(domain, domain)) for domain in catalogs}


def _source_packages(status: Path) -> dict[str, str]:
    """dpkg's binary package -> its source package (`Source: glibc (2.36-9)` -> glibc; without one, itself)."""
    found: dict[str, str] = {}
    text = status.read_text(encoding="utf-8", errors="replace") if status.is_file() else ""
    for stanza in text.split("\n\n"):
        fields = dict(line.split(":", 1) for line in stanza.splitlines() if ":" in line and not line[:1].isspace())
        if "Package" in fields:
            package = fields["Package"].strip()
            found[package] = fields.get("Source", package).strip().split(" ")[0] or package
    return found


def held_out_order(packages: list[str]) -> list[str]:
    """Packages in the order held-out sets are drawn from: by a hash of each name, so the draw is the same on every
    machine and run, and adding a package moves no other unless it lands among the held-out ones (then the last of
    them moves down a set)."""
    return sorted(packages, key=lambda name: hashlib.sha256(name.encode("utf-8")).hexdigest())


def assign_splits(packages: list[str], valid: int, test: int) -> dict[str, list[str]]:
    """Split -> its packages (sorted): the first `test` of held_out_order for test, the next `valid` for validation,
    every other for training."""
    check(
        valid + test < len(packages),
        f"{len(packages)} packages cannot hold out {valid} for validation and {test} for test and keep one for "
        "training; give fewer --valid-packages/--test-packages",
    )
    order = held_out_order(packages)
    chosen = {"test": order[:test], "valid": order[test : test + valid], "train": order[test + valid :]}
    return {split: sorted(chosen[split]) for split in SPLITS}


def collect_catalogs(cfg: CatalogsConfig, out: Path, quiet: bool = False, dpkg_dir: Path = DPKG_DIR) -> dict:
    """Copy the catalogs of cfg.target_lang into OUT/<split>/DOMAIN.mo, each package's together (an earlier
    collection's files there replaced), write the held-out pairs as OUT/lines/<split>.<lang> and OUT/catalogs.json;
    returns that summary."""
    locale_dir = Path(cfg.locale_dir) if cfg.locale_dir else default_locale_dir()
    catalogs = find_catalogs(locale_dir, cfg.target_lang)
    check(
        bool(catalogs),
        f"{locale_dir}: no gettext catalogs for {cfg.target_lang!r} (no {cfg.target_lang}/LC_MESSAGES/*.mo); they "
        f"come with the packages themselves: install the language's (Ubuntu: language-pack-{cfg.target_lang}; "
        "Debian: the language's task package, libc-l10n and the other *-l10n packages), and on a minimal or container "
        "image, which leaves /usr/share/locale out, remove that path-exclude from /etc/dpkg/dpkg.cfg.d/ and reinstall "
        "the packages; or give --locale-dir",
    )
    owner = package_of(catalogs, dpkg_dir)
    splits = assign_splits(sorted(set(owner.values())), cfg.valid_packages, cfg.test_packages)
    langs = (cfg.source_lang, cfg.target_lang)
    summary: dict = {**asdict(cfg), "locale_dir": str(locale_dir), "splits": {}}
    with progress(quiet) as bar:
        task = bar.add_task("collect catalogs", total=len(catalogs), info="")
        for split in SPLITS:
            folder = out / split
            folder.mkdir(parents=True, exist_ok=True)
            for stale in folder.glob("*.mo"):
                stale.unlink()
            counts, packages = PairCounts(), {}
            lines: list[tuple[str, str]] = []
            for package in splits[split]:
                domains = {}
                for domain in sorted(d for d in catalogs if owner[d] == package):
                    target = folder / f"{domain}.mo"
                    shutil.copyfile(catalogs[domain], target)
                    pairs = list(read_pairs([target], langs, counts))  # read once: counted, a bad file refused now
                    if split != "train":
                        lines.extend(pairs)
                    domains[domain] = {"pairs": len(pairs), "from": str(catalogs[domain])}
                    bar.update(task, advance=1, info=domain)
                packages[package] = {"pairs": sum(d["pairs"] for d in domains.values()), "catalogs": domains}
            if split != "train":
                _write_lines(out / LINES_DIR, split, langs, lines)
            summary["splits"][split] = {
                "pairs": counts.pairs,
                "uneven_lines_joined": counts.uneven_lines,
                "packages": packages,
            }
    _write_text(out / SUMMARY_NAME, json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    return summary


def _write_lines(folder: Path, split: str, langs: tuple[str, str], pairs: list[tuple[str, str]]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for side, lang in enumerate(langs):
        _write_text(folder / f"{split}.{lang}", "".join(pair[side] + "\n" for pair in pairs))


def _write_text(path: Path, text: str) -> None:
    with atomic_write(path) as file:
        file.write(text.encode("utf-8"))
