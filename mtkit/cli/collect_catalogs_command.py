"""`mtkit collect-catalogs`: the machine's gettext catalogs of one language gathered into a corpus folder, held out
by package (mtkit.corpus.gettext_catalogs); registered on the app by mtkit.cli.main. The split's packages and pairs
on stdout (JSON with --json), progress on stderr.
"""

from __future__ import annotations

from pathlib import Path

import typer

from mtkit.cli.command import emit, user_errors
from mtkit.cli.options import option
from mtkit.corpus.gettext_catalogs import CatalogsConfig, collect_catalogs


@user_errors
def collect_catalogs_command(
    out: Path = typer.Option(..., "--out", help="The corpus folder: train/, valid/, test/, lines/, catalogs.json."),
    target_lang: str = option(CatalogsConfig, "target_lang"),
    source_lang: str = option(CatalogsConfig, "source_lang"),
    locale_dir: str = option(CatalogsConfig, "locale_dir"),
    valid_packages: int = option(CatalogsConfig, "valid_packages"),
    test_packages: int = option(CatalogsConfig, "test_packages"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar."),
    as_json: bool = typer.Option(False, "--json", help="The summary as JSON."),
) -> None:
    """Copy this machine's gettext catalogs (LOCALE_DIR/LANG/LC_MESSAGES/*.mo) into OUT/train, OUT/valid and
    OUT/test, whole packages held out for validation and test, for `mtkit preprocess` to read as a corpus."""
    cfg = CatalogsConfig(target_lang, source_lang, locale_dir, valid_packages, test_packages)
    summary = collect_catalogs(cfg, out, quiet)
    text = "\n".join(
        f"{split}: {info['pairs']} pairs from {len(info['packages'])} packages"
        + (f" ({', '.join(info['packages'])})" if split != "train" else "")
        for split, info in summary["splits"].items()
    )
    emit(summary, as_json, f"{text}\n{out / 'catalogs.json'}: the packages of each split")
