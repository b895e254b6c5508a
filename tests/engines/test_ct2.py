"""CTranslate2 as an engine of mtkit translate: the torch engine's output, prefixes, the export cache, no torch.

The equality rests on CTranslate2 behaviour it does not document (raw scores at a negligible length penalty, its
stopping rule, what it does with a forced prefix); the tests named `test_ctranslate2_*` guard those directly.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import ctranslate2
import pytest

from mtkit.engines.config import EngineConfig
from mtkit.engines.ct2 import MIN_BATCH, RAW_SCORES, CT2Translator
from mtkit.engines.ct2_cache import CACHE_DIR, EXPORT_REVISION, model_directory
from mtkit.engines.factory import EXPORT_ON_FIRST_USE, load_translator
from mtkit.engines.torch_engine import TorchTranslator
from mtkit.errors import UserError
from mtkit.file_names import CACHE_KEY_NAME, MODEL_NAME
from mtkit.search.config import SearchOverrides, TranslateConfig
from tests.conftest import run_mtkit_in_process

CT2_CPU = EngineConfig(engine="ctranslate2", device="cpu")


def assert_same_best(torch_hyps: list, ct2_hyps: list) -> None:
    """Identical best hypothesis per line; every hypothesis both engines return, scored alike."""
    differ = [
        i
        for i, (a, b) in enumerate(zip(torch_hyps, ct2_hyps))
        if [h.tokens for h in a[:1]] != [h.tokens for h in b[:1]]
    ]
    assert differ == [], f"{len(differ)} lines differ, e.g. {differ[:5]}"
    for a, b in zip(torch_hyps, ct2_hyps):
        scores = {tuple(h.tokens): h.score for h in a}
        for h in b:
            if tuple(h.tokens) in scores:
                assert h.score == pytest.approx(scores[tuple(h.tokens)], abs=1e-4)


SETTINGS = [  # beam, GNMT alpha, max_len_a, max_len_b, nbest
    (4, 0.0, 1.0, 50, 1),
    (4, 0.6, 1.0, 50, 2),
    (4, 1.0, 1.0, 50, 1),
    (1, 0.6, 1.0, 50, 1),
    (4, 0.6, 0.5, 2, 1),  # small maximum lengths: most sentences end at theirs (forced, scored </s>)
    (5, 1.0, 0.0, 1, 3),
    (1, 0.0, 0.0, 3, 1),
    (4, 0.6, 0.0, 0, 1),  # a maximum of 0: </s> only
    (32, 0.6, 1.0, 50, 4),  # </s> among the first step's best of a few lines: decoded again with the minimum length
]


@pytest.mark.exactness
@pytest.mark.parametrize("beam,alpha,a,b,nbest", SETTINGS)
def test_both_engines_translate_every_line_alike(
    run: Path, lines: list[str], beam: int, alpha: float, a: float, b: int, nbest: int
) -> None:
    options = dict(beam=beam, length_penalty=alpha, max_len_a=a, max_len_b=b, nbest=nbest)
    expected = TorchTranslator.load(run, **options).translate_hypotheses(lines)
    found = CT2Translator.load(run, exporter=EXPORT_ON_FIRST_USE, device="cpu", **options).translate_hypotheses(lines)
    assert all(len(h) == nbest for h in found) and len(found) == len(lines)
    assert_same_best(expected, found)


@pytest.mark.exactness
def test_output_does_not_depend_on_the_batch(run: Path, lines: list[str]) -> None:
    """One sentence per batch, 300 and 8,000 tokens, and two batches at once (inter_threads 2): the same output."""
    settings = [{"batch_tokens": 1}, {"batch_tokens": 300}, {"batch_tokens": 8000}, {"batch_tokens": 300, "workers": 2}]
    results = [
        CT2Translator.load(
            run, exporter=EXPORT_ON_FIRST_USE, device="cpu", max_len_b=20, nbest=2, **options
        ).translate_hypotheses(lines)
        for options in settings
    ]
    tokens = [[[h.tokens for h in hyps] for hyps in result] for result in results]
    assert tokens[0] == tokens[1] == tokens[2] == tokens[3]


def test_batches_share_a_maximum_length_unless_small() -> None:
    """Sentences of one maximum length per batch (decoded at it); small groups merge into the next; the token budget
    holds; a sentence with a prefix is never batched with one without."""
    engine = CT2Translator(None, None, TranslateConfig(max_len_a=1.0, max_len_b=0, batch_tokens=2000), 1024, "cpu")
    lengths = [10] * 40 + [11] * 40 + [3] * 2 + [4] * 2 + [30] * 100
    ids = [[7] * n for n in lengths]
    prefixes = [[] for _ in ids[:-1]] + [[7, 7]]
    batches = engine._batches(ids, prefixes, list(range(len(ids))))
    assert MIN_BATCH == 32 and [(len(batch), steps) for batch, steps in batches] == [
        (44, 10),
        (40, 11),
        (64, 30),
        (35, 30),
        (1, 30),
    ]
    assert sorted(i for batch, _ in batches for i in batch) == list(range(len(ids)))
    assert all(len(batch) * (max(lengths[i] for i in batch) + 1) <= 2000 for batch, _ in batches)


@pytest.mark.exactness
def test_prefixes_in_both_engines(run: Path, lines: list[str], prefixes: list[str]) -> None:
    """Both engines give the same translations, each beginning with its prefix; a line without one is unchanged."""
    for options in (dict(beam=4, nbest=2), dict(beam=1), dict(beam=3, max_len_a=0.5, max_len_b=1)):
        torch_engine, ct2_engine = (
            TorchTranslator.load(run, **options),
            CT2Translator.load(run, exporter=EXPORT_ON_FIRST_USE, device="cpu", **options),
        )
        expected = torch_engine.translate_hypotheses(lines, prefixes=prefixes)
        found = ct2_engine.translate_hypotheses(lines, prefixes=prefixes)
        assert_same_best(expected, found)
        texts = torch_engine.tokenizer.decode([hyps[0].tokens for hyps in expected])
        assert all(text.startswith(prefix) for text, prefix in zip(texts, prefixes))
        plain = [i for i, p in enumerate(prefixes) if not p]
        for engine, with_prefixes in ((torch_engine, expected), (ct2_engine, found)):
            alone = engine.translate_hypotheses([lines[i] for i in plain])
            assert [[h.tokens for h in with_prefixes[i]] for i in plain] == [[h.tokens for h in hyps] for hyps in alone]
            # Bit-identical scores in the torch engine's beam search; the last bits of CTranslate2's and of the
            # torch engine's greedy path depend on the batch.
            exact = {"abs": 0} if engine is torch_engine and options["beam"] > 1 else {"abs": 1e-5}
            assert [h.score for i in plain for h in with_prefixes[i]] == pytest.approx(
                [h.score for hyps in alone for h in hyps], **exact
            )


def test_ctranslate2_scores_are_raw_log_prob_sums(run: Path, lines: list[str]) -> None:
    """Guards what the engine relies on: at length_penalty RAW_SCORES CTranslate2 returns `beam` finished hypotheses
    whose scores are the sums of their tokens' log-probs, </s> included; behind a forced prefix the prefix's tokens
    count nothing; a beam that could not continue past a prefix comes back with a score of about -1e10."""
    translator = ctranslate2.Translator(str(model_directory(run, EXPORT_ON_FIRST_USE)), device="cpu", intra_threads=1)
    engine = CT2Translator.load(run, exporter=EXPORT_ON_FIRST_USE, device="cpu")
    sources = [[engine.pieces[i] for i in ids] for ids in engine.encode_lines(lines[:20])]
    results = translator.translate_batch(
        sources,
        beam_size=4,
        num_hypotheses=4,
        return_scores=True,
        length_penalty=RAW_SCORES,
        min_decoding_length=0,
        max_decoding_length=60,
    )
    ended = 0
    for source, result in zip(sources, results):
        assert len(result.hypotheses) == 4
        scored = translator.score_batch([source] * 4, result.hypotheses)  # each token's log-prob, then </s>'s
        # A hypothesis cut at the maximum length has no </s>, and its score none of its log-prob.
        sums = [sum(s.log_probs if len(h) < 60 else s.log_probs[:-1]) for h, s in zip(result.hypotheses, scored)]
        assert result.scores == pytest.approx(sums, abs=1e-4)
        ended += sum(len(h) < 60 for h in result.hypotheses)
    assert ended > 40
    prefix = [["▁Ein"]] * len(sources)
    options = dict(beam_size=4, num_hypotheses=4, return_scores=True, length_penalty=RAW_SCORES, min_decoding_length=0)
    for result in translator.translate_batch(sources, prefix, max_decoding_length=1, **options):
        assert result.hypotheses[0] == ["▁Ein"] and result.scores[0] == 0.0  # the prefix scores nothing
        assert len(result.scores) == 4 and max(result.scores[1:]) < -1e9  # one beam through the prefix, 3 dead
    for source, result in zip(sources, translator.translate_batch(sources, prefix, max_decoding_length=4, **options)):
        assert len(result.hypotheses) == 4 and all(h[0] == "▁Ein" for h in result.hypotheses)
        for h, score in zip(result.hypotheses, result.scores):
            log_probs = translator.score_batch([source], [h])[0].log_probs  # h's tokens, then </s>
            ended = len(h) < 4  # else cut at the maximum, without </s>
            assert score == pytest.approx(sum(log_probs[1 : len(log_probs) if ended else len(h)]), abs=1e-4)


def mtkit(*args: str, stdin: str = "", setup: str = "") -> subprocess.CompletedProcess:
    script = f"import sys\n{setup}sys.argv = ['mtkit'] + {list(args)!r}\nfrom mtkit.cli.main import main\nmain()\n"
    return subprocess.run(
        [sys.executable, "-c", script],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        timeout=120,
    )


NO_TORCH = "sys.modules['torch'] = None\n"  # `import torch` raises ImportError from here on


def test_the_ctranslate2_path_starts_without_torch(run: Path, lines: list[str]) -> None:
    """A warm cache: `mtkit translate --engine ctranslate2` in a process where torch cannot be imported gives the
    torch engine's lines (and the n-best format, scores included)."""
    model_directory(run, EXPORT_ON_FIRST_USE)  # the cache, made with torch here
    text = "\n".join(lines[:20] + [""]) + "\n"
    for extra in ([], ["--nbest", "2", "--beam", "3"]):
        found = mtkit("translate", str(run), "--engine", "ctranslate2", "-q", *extra, stdin=text, setup=NO_TORCH)
        assert found.returncode == 0, found.stderr
        expected = run_mtkit_in_process("translate", run, "-q", *extra, stdin=text)  # the torch engine's lines
        if not extra:
            assert found.stdout == expected.stdout
            continue
        # Scores agree to about 1e-5 (a 4th decimal may differ); n-best lists can differ below the best.
        rows = [(a.split("\t"), b.split("\t")) for a, b in zip(found.stdout.splitlines(), expected.stdout.splitlines())]
        assert len(rows) == len(expected.stdout.splitlines()) == 42
        for a, b in rows:
            assert len(a) == len(b) and a[:-2] == b[:-2] and (a[-2] == b[-2] or abs(float(a[-2]) - float(b[-2])) < 1e-3)
            assert a[-1] == b[-1] or (len(a) == 4 and a[1] != "0")


def test_the_engine_imports_no_torch_where_torch_is_installed(run: Path) -> None:
    """ctranslate2.specs imports torch when it can: decoding must not ask for it (mtkit.exports.ctranslate2_library)."""
    model_directory(run, EXPORT_ON_FIRST_USE)
    script = (
        "import sys\nfrom mtkit.engines.config import EngineConfig\nfrom mtkit.engines.factory import load_translator\n"
        "engine = EngineConfig(engine='ctranslate2', device='cpu')\n"
        f"print(load_translator({str(run)!r}, engine).translate(['A dog.']))\n"
        "print(sorted(m for m in ('torch', 'ctranslate2.specs', 'numpy') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == "[]", done.stdout + done.stderr


def cache_key(run: Path) -> dict:
    return json.loads((run / CACHE_DIR / CACHE_KEY_NAME).read_text())


def test_the_cache_follows_its_checkpoint_and_is_rebuilt_when_damaged(tiny_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run, ignore=shutil.ignore_patterns(CACHE_DIR))
    first = CT2Translator.load(run, exporter=EXPORT_ON_FIRST_USE, device="cpu").translate(["A man is sleeping."])
    key = cache_key(run)
    assert key["checkpoint"]["path"] == str((run / "average.pt").resolve()) and key["checkpoint"]["sha256"]
    assert model_directory(run, EXPORT_ON_FIRST_USE) == run / CACHE_DIR and cache_key(run) == key  # warm: used as is
    # Another checkpoint: the newest step checkpoint once average.pt is gone.
    (run / "average.pt").unlink()
    model_directory(run, EXPORT_ON_FIRST_USE)
    assert cache_key(run)["checkpoint"]["path"].endswith("step_00000150.pt")
    shutil.copy(tiny_run / "average.pt", run / "average.pt")
    model_directory(run, EXPORT_ON_FIRST_USE)
    assert (cache_key(run)["checkpoint"]["path"], cache_key(run)["checkpoint"]["sha256"]) == (
        key["checkpoint"]["path"],
        key["checkpoint"]["sha256"],
    )
    older = cache_key(run) | {"revision": EXPORT_REVISION - 1}  # an older mtkit's export (its alignment layer)
    (run / CACHE_DIR / CACHE_KEY_NAME).write_text(json.dumps(older))
    model_directory(run, EXPORT_ON_FIRST_USE)
    assert cache_key(run)["revision"] == EXPORT_REVISION
    damages = {
        "truncated model": lambda cache: (cache / MODEL_NAME).write_bytes((cache / MODEL_NAME).read_bytes()[:1000]),
        "missing model": lambda cache: (cache / MODEL_NAME).unlink(),
        "bad key": lambda cache: (cache / CACHE_KEY_NAME).write_text("{not json"),
        "missing key": lambda cache: (cache / CACHE_KEY_NAME).unlink(),
    }
    for name, damage in damages.items():
        damage(run / CACHE_DIR)
        assert (
            CT2Translator.load(run, exporter=EXPORT_ON_FIRST_USE, device="cpu").translate(["A man is sleeping."])
            == first
        ), name
        assert cache_key(run)["files"][MODEL_NAME] == (run / CACHE_DIR / MODEL_NAME).stat().st_size, name


def test_an_export_directory_is_used_as_given(run: Path, tmp_path: Path) -> None:
    from mtkit.exports.ctranslate2 import export_ctranslate2

    out = Path(export_ctranslate2(run, tmp_path / "ct2")["out"])
    assert model_directory(out, None) == out and not (out / CACHE_KEY_NAME).exists()
    translator = load_translator(out, CT2_CPU)
    assert translator.translate(["A man is sleeping."]) == TorchTranslator.load(run).translate(["A man is sleeping."])
    assert translator.info["engine"] == "ctranslate2" and translator.info["checkpoint"]


def test_refusals_are_one_line(run: Path, tmp_path: Path) -> None:
    model_directory(run, EXPORT_ON_FIRST_USE)
    cases = {
        ("--ensemble", str(run)): "--ensemble",
        ("--dtype", "bf16"): "--dtype bf16: CTranslate2 on cpu supports",
        ("--dtype", "int4"): "--dtype int4: --engine ctranslate2 takes",
        ("--device", "tpu"): "--device tpu",
    }
    for args, message in cases.items():
        result = mtkit("translate", str(run), "--engine", "ctranslate2", "--device", "cpu", *args, stdin="A dog.\n")
        assert result.returncode == 2 and result.stderr.splitlines() == [result.stderr.strip()], result.stderr
        assert message in result.stderr and "Traceback" not in result.stderr
    with pytest.raises(UserError, match="early_stop"):
        CT2Translator.load(run, exporter=EXPORT_ON_FIRST_USE, device="cpu", early_stop=False)
    wrong = mtkit("translate", str(run), "--engine", "nope", stdin="A dog.\n")
    assert wrong.returncode == 2 and "--engine nope" in wrong.stderr


def test_prefix_file_counts_must_match(run: Path, tmp_path: Path) -> None:
    source, prefixes = tmp_path / "in.en", tmp_path / "prefix.de"
    source.write_text("A man is sleeping.\nA dog runs.\n")
    prefixes.write_text("Ein Hund\n\n")
    for engine in ("torch", "ctranslate2"):
        both = run_mtkit_in_process(
            "translate", run, "--engine", engine, "-q", "--input", source, "--prefix-file", prefixes
        )
        assert both.returncode == 0, both.stderr
        first, second = both.stdout.splitlines()
        assert first.startswith("Ein Hund") and second == TorchTranslator.load(run).translate(["A dog runs."])[0]
    prefixes.write_text("Ein Hund\n")
    from_file = mtkit("translate", str(run), "--input", str(source), "--prefix-file", str(prefixes))  # before loading
    from_stdin = mtkit(
        "translate", str(run), "--engine", "ctranslate2", "-q", "--prefix-file", str(prefixes), stdin=source.read_text()
    )
    for result in (from_file, from_stdin):
        assert (
            result.returncode == 2 and str(prefixes) in result.stderr and len(result.stderr.strip().splitlines()) == 1
        )


@pytest.mark.exactness
def test_an_export_of_a_multilingual_model_honours_target_lang_as_torch_does(
    en_de_fr_run: Path, multi30k: Path, tmp_path: Path
) -> None:
    """The exported vocabulary holds the >>xx<< pieces; CTranslate2 on the export directory, told --target-lang (or
    reading a line's own code), gives the torch engine's hypotheses; a code the model lacks is refused alike."""
    from mtkit.exports.ctranslate2 import export_ctranslate2
    from tests.conftest import MULTILINGUAL_SENTENCES, multilingual_lines

    out = Path(export_ctranslate2(en_de_fr_run, tmp_path / "ct2")["out"])
    assert {">>de<<", ">>fr<<"} <= set(json.loads((out / "shared_vocabulary.json").read_text(encoding="utf-8")))
    assert json.loads((out / "mtkit.json").read_text(encoding="utf-8"))["language_codes"] == ["de", "fr"]
    assert '[">>de<<"] + sp.encode(' in (out / "README.md").read_text(encoding="utf-8")
    english = multilingual_lines(multi30k, MULTILINGUAL_SENTENCES)["en"]
    lines = english + [">>de<< " + english[0], "", "A dog runs in the snow."]
    for lang, beam in (("de", 4), ("fr", 4), ("fr", 1)):
        expected = TorchTranslator.load(en_de_fr_run, target_lang=lang, beam=beam, nbest=1).translate_hypotheses(lines)
        found = load_translator(out, CT2_CPU, SearchOverrides(target_lang=lang, beam=beam, nbest=1))
        assert_same_best(expected, found.translate_hypotheses(lines))
    with pytest.raises(UserError, match="^--target-lang cs: this model translates into de, fr; choose one$"):
        load_translator(out, CT2_CPU, SearchOverrides(target_lang="cs"))
