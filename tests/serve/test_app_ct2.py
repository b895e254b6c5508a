"""`mtkit serve --engine ctranslate2` as a client sees it, in a process where `import torch` fails.

The same JSON as `mtkit translate --engine ctranslate2` (batched together or not, n-best, prefixes), the same 4xx
answers and SIGTERM drain as the torch engine (tests/serve/test_app.py).
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.serve.test_app import (
    BAD_REQUESTS,
    DRAIN_OPTIONS,
    MTKIT_WITHOUT_TORCH,
    SMALL_LIMITS,
    Server,
    check_bad_requests_are_answered,
    check_prefixes,
    check_sigterm_drains,
    cli_output,
)

pytest.importorskip("ctranslate2", reason="ctranslate2 is not installed: pip install 'mtkit[ctranslate2]'")

CT2 = ("--engine", "ctranslate2")


@pytest.fixture(scope="module")
def ct2_cli_translations(tiny_run: Path, flickr_lines: list[str]) -> list[str]:
    """`mtkit translate --engine ctranslate2 --split-sentences` of the lines (as the server translates them by
    default); it also exports the run's model to its cache, which the torch-free server needs (exporting imports
    torch)."""
    return cli_output(tiny_run, flickr_lines, *CT2, "--split-sentences")


@pytest.fixture(scope="module")
def ct2_server(tiny_run: Path, ct2_cli_translations: list[str], tmp_path_factory: pytest.TempPathFactory):
    started = Server(
        tiny_run, tmp_path_factory.mktemp("serve-ct2") / "stderr.log", *CT2, *SMALL_LIMITS, command=MTKIT_WITHOUT_TORCH
    )
    yield started
    started.stop()


@pytest.mark.exactness
def test_answers_equal_mtkit_translate(
    ct2_server: Server, flickr_lines: list[str], ct2_cli_translations: list[str]
) -> None:
    assert len(ct2_cli_translations) == len(flickr_lines)
    status, _, answer = ct2_server.translate({"text": flickr_lines})
    assert status == 200 and answer["translations"] == ct2_cli_translations
    # Concurrent clients share CTranslate2 batches; each still gets its own lines' translations.
    chunks = [list(range(i, min(i + 2, len(flickr_lines)))) for i in range(0, len(flickr_lines), 2)]
    with ThreadPoolExecutor(len(chunks)) as pool:
        answers = list(pool.map(lambda rows: ct2_server.translate({"text": [flickr_lines[i] for i in rows]}), chunks))
    for rows, (status, _, answer) in zip(chunks, answers):
        assert status == 200 and answer["translations"] == [ct2_cli_translations[i] for i in rows]


def test_beam_and_nbest_equal_the_cli(ct2_server: Server, tiny_run: Path, flickr_lines: list[str]) -> None:
    lines = flickr_lines[:4]
    assert ct2_server.translate({"text": lines, "beam": 1, "split_sentences": False})[2]["translations"] == cli_output(
        tiny_run, lines, *CT2, "--beam", "1"
    )
    rows = [row.split("\t") for row in cli_output(tiny_run, lines, *CT2, "--beam", "3", "--nbest", "2")]
    status, _, answer = ct2_server.translate({"text": lines, "beam": 3, "nbest": 2})
    assert status == 200
    got = [
        (str(i), str(rank), f"{h['score']:.4f}", h["text"])
        for i, hyps in enumerate(answer["translations"])
        for rank, h in enumerate(hyps)
    ]
    assert got == [tuple(row) for row in rows]


def test_prefixes_answer_as_the_cli(
    ct2_server: Server, tiny_run: Path, flickr_lines: list[str], tmp_path: Path
) -> None:
    check_prefixes(ct2_server, tiny_run, flickr_lines, tmp_path, *CT2)


def test_info_names_the_engine(ct2_server: Server, tiny_run: Path) -> None:
    status, _, info = ct2_server.request("GET", "/info")
    assert status == 200 and (info["engine"], info["dtype"], info["device"]) == ("ctranslate2", "float32", "cpu")
    assert info["limits"]["max_lines"] == 16 and info["translate"]["beam"] == 4
    assert (info["source_lang"], info["target_lang"], info["model"]["d_model"]) == ("en", "de", 64)
    assert "(ctranslate2, cpu, float32)" in ct2_server.log.read_text()


def test_bad_requests_get_their_4xx_and_leave_the_service_working(ct2_server: Server) -> None:
    check_bad_requests_are_answered(ct2_server, BAD_REQUESTS)


@pytest.mark.slow
def test_sigterm_finishes_the_request_in_flight_and_exits_0(tiny_run: Path, ct2_server: Server, tmp_path: Path) -> None:
    check_sigterm_drains(Server(tiny_run, tmp_path / "stderr.log", *CT2, *DRAIN_OPTIONS, command=MTKIT_WITHOUT_TORCH))


def test_unknown_engine_and_dtype_are_one_line_errors(tiny_run: Path) -> None:
    import subprocess

    for options, message in [
        (("--engine", "onnx"), "--engine onnx: choose one of torch, ctranslate2"),
        ((*CT2, "--dtype", "int4"), "--dtype int4"),
    ]:
        run = subprocess.run(
            [*MTKIT_WITHOUT_TORCH, "serve", str(tiny_run), "--port", "0", *options],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 2 and "Traceback" not in run.stderr
        assert run.stderr.strip().splitlines()[-1].startswith("error: ") and message in run.stderr


def test_libretranslate_requests_equal_the_cli_with_ctranslate2(
    ct2_server: Server, flickr_lines: list[str], ct2_cli_translations: list[str]
) -> None:
    import html
    from urllib.parse import urlencode

    body = urlencode({"q": flickr_lines[0], "source": "en", "target": "de"}).encode()
    status, _, answer = ct2_server.request(
        "POST", "/translate", body, {"Content-Type": "application/x-www-form-urlencoded"}
    )
    assert status == 200 and answer["translatedText"] == ct2_cli_translations[0]
    status, _, answer = ct2_server.request(
        "POST",
        "/translate",
        json.dumps(
            {"q": [f"<p>{line}</p>" for line in flickr_lines[:2]], "source": "en", "target": "de", "format": "html"}
        ).encode(),
        {"Content-Type": "application/json"},
    )
    expected = [f"<p>{html.escape(text, quote=False)}</p>" for text in ct2_cli_translations[:2]]
    assert status == 200 and answer["translatedText"] == expected


def test_a_multilingual_model_answers_in_each_requested_target(
    en_de_fr_run: Path, multi30k: Path, tmp_path: Path
) -> None:
    """The torch-free server on the English -> German, French model: a request's "target" picks the language, and
    each answer is `mtkit translate --engine ctranslate2 --target-lang` of its line, also when requests into both
    languages share a batch; the French answers are the memorized French references."""
    from tests.conftest import MULTILINGUAL_SENTENCES, multilingual_lines

    text = multilingual_lines(multi30k, MULTILINGUAL_SENTENCES)
    lines = text["en"][:6]
    expected = {lang: cli_output(en_de_fr_run, lines, *CT2, "--target-lang", lang) for lang in ("de", "fr")}
    assert sum(hyp == ref for hyp, ref in zip(expected["fr"], text["fr"])) >= 5  # French, not German
    server = Server(en_de_fr_run, tmp_path / "stderr.log", *CT2, "--max-delay-ms", "100", command=MTKIT_WITHOUT_TORCH)
    try:
        requests_ = [(lang, line) for line in lines for lang in ("de", "fr")]
        with ThreadPoolExecutor(len(requests_)) as pool:
            answers = list(pool.map(lambda r: server.translate({"text": [r[1]], "target": r[0]}), requests_))
        assert [a[2]["translations"][0] for a in answers] == [
            expected[lang][lines.index(line)] for lang, line in requests_
        ]
        status, _, refused = server.translate({"text": ["A dog runs."], "target": "cs"})
        assert status == 400 and "cs is not supported" in refused["error"]
    finally:
        server.stop()
