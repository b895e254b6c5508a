"""mtkit.serve.router: a server's models by language pair; routing and its 400s; files listing run directories."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from mtkit.errors import UserError
from mtkit.serve.request import RequestError
from mtkit.serve.router import Router, ServedModel, expand_runs, model_pairs, named_runs


def served(
    run: str, source: str | None, target: str | None, codes: tuple[str, ...] = (), pairs: list[str] | None = None
) -> ServedModel:
    """A model whose manifest names source and target (and `pairs`), whose vocabulary has the >>code<< pieces."""
    manifest = {"source_lang": source, "target_lang": target} if source else {}
    if pairs is not None:
        manifest["pairs"] = pairs
    tokenizer = SimpleNamespace(language_codes=lambda: list(codes))
    translator = SimpleNamespace(info={"manifest": manifest}, tokenizer=tokenizer)
    return ServedModel(run, translator, worker=None, pairs=model_pairs(translator))  # type: ignore[arg-type]


def test_pairs_come_from_the_manifest_lower_cased() -> None:
    assert served("a", "EN", "De").pairs == [("en", "de")]
    assert served("b", None, None).pairs == []


def test_a_multilingual_model_serves_every_pair_of_its_data_else_its_source_into_each_code() -> None:
    assert served("a", "en", "de", ("de", "fr"), ["en-de", "EN-fr", "de-fr"]).pairs == [
        ("de", "fr"),
        ("en", "de"),
        ("en", "fr"),
    ]
    assert served("b", "en", "mul", ("cs", "de", "fr")).pairs == [("en", "cs"), ("en", "de"), ("en", "fr")]
    assert served("c", None, None, ("de", "fr")).pairs == []


def test_one_language_given_routes_to_the_one_model_that_matches_it() -> None:
    multilingual, de_en = served("en-mul", "en", "mul", ("de", "fr")), served("de-en", "de", "en")
    router = Router([multilingual, de_en])
    assert router.route(None, "fr") is multilingual and router.route("en", None) is multilingual
    assert router.route(None, "en") is de_en
    assert router.targets("en") == ["de", "fr"]


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


@pytest.mark.parametrize(
    ("source", "target", "message"),
    [
        ("en", "en", "no model translates en->en; pairs served: de->en, en->de, en->it"),
        ("es", "de", r"es is not supported \(languages served: de, en, it\)"),
        (None, None, "this server holds 3 models: give source and target"),
        ("en", None, r"several models translate en->\?: give both source and target"),
        ("it", None, r"no model translates it->\?; pairs served"),
    ],
)
def test_a_pair_no_model_serves_is_a_400_naming_what_is_served(source, target, message: str) -> None:
    router = Router([served("en-de", "en", "de"), served("de-en", "de", "en"), served("en-it", "en", "it")])
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


def test_models_are_named_by_their_directory_or_as_given_never_by_path(tmp_path: Path) -> None:
    listing = tmp_path / "models.txt"
    listing.write_text("runs/en-de\nfast=runs/small/en-de\n", encoding="utf-8")
    (tmp_path / "a=b").mkdir()  # an existing path with "=" in it is a path, not NAME=PATH
    named = named_runs(
        [listing, Path("other/en-de"), tmp_path / "a=b", Path("../x=runs/y"), Path("runs/small/average.pt")]
    )
    assert named == [
        ("en-de", Path("runs/en-de")),
        ("fast", Path("runs/small/en-de")),
        ("en-de-2", Path("other/en-de")),
        ("a=b", tmp_path / "a=b"),
        ("y", Path("../x=runs/y")),  # "../x" is no NAME: the whole is a path
        ("small", Path("runs/small/average.pt")),
    ]
