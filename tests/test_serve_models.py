"""mtkit.serve_models: a server's models by language pair; routing and its 400s; files listing run directories."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from mtkit.errors import UserError
from mtkit.serve_models import Router, ServedModel, expand_runs, model_pairs
from mtkit.serve_request import RequestError


def served(run: str, source: str | None, target: str | None) -> ServedModel:
    manifest = {"source_lang": source, "target_lang": target} if source else {}
    translator = SimpleNamespace(info={"manifest": manifest})
    return ServedModel(run, translator, worker=None, pairs=model_pairs(translator))  # type: ignore[arg-type]


def test_pairs_come_from_the_manifest_lower_cased() -> None:
    assert served("a", "EN", "De").pairs == [("en", "de")]
    assert served("b", None, None).pairs == []


def test_routes_by_pair_and_lists_languages_with_their_targets() -> None:
    en_de, de_en, en_fr = served("en-de", "en", "de"), served("de-en", "de", "en"), served("en-fr", "en", "fr")
    router = Router([en_de, de_en, en_fr])
    assert router.route("en", "fr") is en_fr and router.route("de", "en") is de_en
    assert router.languages() == ["de", "en", "fr"]
    assert router.sources("en") == ["de"] and router.targets("en") == ["de", "fr"]
    assert router.describe_languages(str.upper) == [
        {"code": "de", "name": "DE", "targets": ["en"]},
        {"code": "en", "name": "EN", "targets": ["de", "fr"]},
        {"code": "fr", "name": "FR", "targets": []},
    ]


@pytest.mark.parametrize(("source", "target", "message"), [
    ("en", "en", "no model translates en->en; pairs served: de->en, en->de"),
    ("es", "de", r"es is not supported \(languages served: de, en\)"),
    (None, None, "this server holds 2 models: give source and target"),
    ("en", None, "give both source and target"),
])
def test_a_pair_no_model_serves_is_a_400_naming_what_is_served(source, target, message: str) -> None:
    router = Router([served("en-de", "en", "de"), served("de-en", "de", "en")])
    with pytest.raises(RequestError, match=message) as refused:
        router.route(source, target)
    assert refused.value.status == 400


def test_one_model_takes_requests_that_name_no_languages_even_without_languages_of_its_own() -> None:
    alone = served("imported", None, None)
    assert Router([alone]).route(None, None) is alone


def test_two_models_of_one_pair_or_an_unnamed_model_beside_others_are_refused_at_start() -> None:
    with pytest.raises(UserError, match="runs/a and runs/b both translate en->de"):
        Router([served("runs/a", "en", "de"), served("runs/b", "en", "de")])
    with pytest.raises(UserError, match="imported: its data manifest names no languages"):
        Router([served("runs/a", "en", "de"), served("imported", None, None)])


def test_a_file_among_the_runs_lists_run_directories(tmp_path: Path) -> None:
    listing = tmp_path / "models.txt"
    listing.write_text("# served models\nruns/en-de\n\n  runs/de-en  \n", encoding="utf-8")
    (tmp_path / "run").mkdir()
    assert expand_runs([listing, tmp_path / "run"]) == [Path("runs/en-de"), Path("runs/de-en"), tmp_path / "run"]
