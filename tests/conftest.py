"""Shared fixtures: the shipped Multi30k en-de data and small slices of it."""

from __future__ import annotations

import gzip
import os
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MULTI30K = ROOT / "data" / "multi30k"

# Tests run on 2 cores next to other work; one intra-op thread keeps them predictable.
os.environ.setdefault("OMP_NUM_THREADS", "1")

# The modules that take longest (`make test`'s first pass, 2-core Xeon, 2026-12-02: 20 to 100 s each, most of it a
# few tests that train, kill or start processes), handed to the two test processes first. pytest-xdist's loadscope
# hands out modules by their number of tests, most first, so a long module of few tests started last and kept one
# process busy alone while the other had nothing left. Order only: every module runs, whole, in one process.
LONGEST_FIRST = (
    "tests/training/test_loop.py",
    "tests/serve/test_libre_endpoints.py",
    "tests/exports/test_huggingface.py",
    "tests/corpus/test_preprocess.py",
    "tests/engines/test_torch_engine.py",
    "tests/reliability/test_ddp_faults.py",
    "tests/bulk/test_shards.py",
    "tests/reliability/test_kill_resume.py",
    "tests/serve/test_app.py",
    "tests/serve/test_replicas.py",
    "tests/engines/test_ct2.py",
    "tests/reliability/test_bad_text.py",
    "tests/exports/test_ctranslate2.py",
    "tests/test_end_to_end.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """LONGEST_FIRST's modules before the rest (Makefile: `--no-loadscope-reorder` keeps this order), each module's
    tests in their own order."""
    rank = {name: k for k, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


def read_gz_lines(path: Path, limit: int | None = None) -> list[str]:
    """First `limit` lines of a gzip text file, without newlines."""
    lines = []
    with gzip.open(path, "rt", encoding="utf-8", newline="\n") as handle:
        for i, line in enumerate(handle):
            if limit is not None and i >= limit:
                break
            lines.append(line.rstrip("\n"))
    return lines


@pytest.fixture(scope="session")
def multi30k() -> Path:
    """Directory with train/val/test_2016_flickr .en.gz/.de.gz."""
    return MULTI30K


def run_mtkit_in_process(*args: object, stdin: str = "") -> subprocess.CompletedProcess:
    """`mtkit ARGS` run in this process (typer's CliRunner), answered as subprocess.run(..., text=True) answers: for
    tests that need a command's output or exit code but nothing only a process has (a signal, a traceback on stderr,
    the exit status the shell sees), without the 1-2 s of a torch import. An exception that escapes the command
    fails the test. What translate and serve set for a process of their own (SIGPIPE, gc.freeze) is left out."""
    import contextlib
    import signal
    from unittest import mock

    from typer.testing import CliRunner

    from mtkit.cli.main import app

    sigpipe = signal.getsignal(signal.SIGPIPE)
    try:
        with (
            mock.patch("mtkit.cli.translate_command.start_up_without_gc", contextlib.nullcontext),
            mock.patch("mtkit.cli.score_pairs_command.start_up_without_gc", contextlib.nullcontext),
            mock.patch("mtkit.cli.filter_pairs_command.start_up_without_gc", contextlib.nullcontext),
            mock.patch("mtkit.cli.synthetic_commands.start_up_without_gc", contextlib.nullcontext),
            mock.patch("mtkit.cli.translate_file_command.start_up_without_gc", contextlib.nullcontext),
        ):
            result = CliRunner().invoke(app, [str(arg) for arg in args], input=stdin)
    finally:
        signal.signal(signal.SIGPIPE, sigpipe)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(["mtkit", *map(str, args)], result.exit_code, result.stdout, result.stderr)


def write_slice(src_dir: Path, split: str, out_prefix: Path, n: int, langs=("en", "de")) -> Path:
    """Write the first n lines of a Multi30k split as plain PREFIX.en / PREFIX.de files."""
    for lang in langs:
        lines = read_gz_lines(src_dir / f"{split}.{lang}.gz", n)
        Path(f"{out_prefix}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out_prefix


# `make test` sets this to one folder for both its passes: the forced-AVX2 pass then copies the runs the first pass
# trained instead of training them again (about 70 s of its 165 on a 2-core Zen 4, 2026-11-26). A fixture's model
# is an input of the tests, not what they prove; each exactness test trains or translates under the pass's kernels.
FIXTURE_CACHE = "MTKIT_TEST_FIXTURE_CACHE"


def trained_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """A session fixture's run directory: trained by `build(run)` into a fresh temporary folder, then kept as it
    was made (before any test touched it) under $MTKIT_TEST_FIXTURE_CACHE; where that holds it already, a copy.
    The test processes of `pytest -n 2` share the folder: one trains a run while the other waits for it."""
    import fcntl
    import shutil

    run = tmp_path_factory.mktemp(name) / "run"
    cache = os.environ.get(FIXTURE_CACHE)
    if not cache:
        build(run)
        return run
    kept = Path(cache) / name
    with open(Path(cache) / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not kept.is_dir():
            build(run)
            partial = kept.with_name(f".{name}.partial")
            shutil.rmtree(partial, ignore_errors=True)
            shutil.copytree(run, partial, symlinks=True)
            partial.rename(kept)
            return run
    shutil.copytree(kept, run, symlinks=True)
    return run


@pytest.fixture(scope="session")
def multi30k_spm(tmp_path_factory: pytest.TempPathFactory, multi30k: Path) -> Path:
    """A small joint en-de sentencepiece model (vocab 1000, first 3000 train pairs), trained once."""
    from mtkit.corpus.tokenizer_training import train_tokenizer

    lines = read_gz_lines(multi30k / "train.en.gz", 3000) + read_gz_lines(multi30k / "train.de.gz", 3000)
    return train_tokenizer(lines, tmp_path_factory.mktemp("spm") / "spm.model", vocab_size=1000)


@pytest.fixture(scope="session")
def multi30k_data(tmp_path_factory: pytest.TempPathFactory, multi30k: Path, multi30k_spm: Path) -> Path:
    """All of Multi30k en-de (train, valid, test_2016_flickr) preprocessed with `multi30k_spm`."""
    from mtkit.corpus.config import PreprocessConfig
    from mtkit.corpus.preprocess import preprocess

    cfg = PreprocessConfig(
        "en",
        "de",
        train=str(multi30k / "train"),
        valid=str(multi30k / "val"),
        test=[str(multi30k / "test_2016_flickr")],
        spm_model=str(multi30k_spm),
    )
    out = tmp_path_factory.mktemp("data") / "multi30k-en-de"
    preprocess(cfg, out)
    return out


# One fixture trained at a time on the machine, whatever process asks: each trains on every core, and two at once (the
# two test processes each training its own session run) put 4 OpenMP threads on 2 cores, whose spinning slowed
# both several-fold (four setups of 140-180 s in one `make test` of 10 min 18 s, against 5 min 22 s without).
TRAINING_LOCK = Path(tempfile.gettempdir()) / "mtkit-tests-fixture-training.lock"


def train_fixture(data: Path, run: Path, recipe) -> Path:
    """Train a session fixture's run on every core this process may use, then give torch back its thread count (one
    in `make test`; CTranslate2 in this process keeps OMP_NUM_THREADS's), holding TRAINING_LOCK. The runs are the
    tests' inputs, made once, and training was most of what they cost: tests using the five trained here, 82 s ->
    68 s on a 2-core Zen 4."""
    import fcntl

    import torch

    from mtkit.training.loop import train

    threads = torch.get_num_threads()
    with open(TRAINING_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        torch.set_num_threads(max(threads, len(os.sched_getaffinity(0))))
        try:
            train(data, run, recipe)
        finally:
            torch.set_num_threads(threads)
    return run


def preprocess_slice(
    out: Path, src_dir: Path, spm: Path, train_pairs: int, valid_pairs: int, valid_from_train: bool = False
) -> Path:
    """Preprocess the first `train_pairs` Multi30k train pairs (and valid pairs) with a given spm model."""
    from mtkit.corpus.config import PreprocessConfig
    from mtkit.corpus.preprocess import preprocess

    raw = out.parent / f"{out.name}-raw"
    raw.mkdir(parents=True, exist_ok=True)
    write_slice(src_dir, "train", raw / "train", train_pairs)
    if valid_from_train:
        write_slice(src_dir, "train", raw / "valid", valid_pairs)
    else:
        write_slice(src_dir, "val", raw / "valid", valid_pairs)
    cfg = PreprocessConfig("en", "de", train=str(raw / "train"), valid=str(raw / "valid"), spm_model=str(spm))
    preprocess(cfg, out)
    return out


def preprocess_hinted(out: Path, src_dir: Path, train_pairs: int, vocab_size: int = 1000) -> Path:
    """The first `train_pairs` Multi30k train pairs (and 50 valid pairs) preprocessed for term hints: a sentencepiece
    model of their own with the reserved pieces, each pair aligned (needs eflomal: mtkit[align])."""
    from mtkit.corpus.config import PreprocessConfig
    from mtkit.corpus.preprocess import preprocess

    raw = out.parent / f"{out.name}-raw"
    raw.mkdir(parents=True, exist_ok=True)
    write_slice(src_dir, "train", raw / "train", train_pairs)
    write_slice(src_dir, "val", raw / "valid", 50)
    cfg = PreprocessConfig("en", "de", train=str(raw / "train"), valid=str(raw / "valid"), vocab_size=vocab_size)
    preprocess(cfg, out, term_hints=True)
    return out


@pytest.fixture(scope="session")
def small_data(tmp_path_factory: pytest.TempPathFactory, multi30k: Path, multi30k_spm: Path) -> Path:
    """2,000 train / 200 valid Multi30k pairs, binarized with the vocab-1000 model."""
    return preprocess_slice(tmp_path_factory.mktemp("small") / "data", multi30k, multi30k_spm, 2000, 200)


@pytest.fixture(scope="session")
def overfit_data(tmp_path_factory: pytest.TempPathFactory, multi30k: Path, multi30k_spm: Path) -> Path:
    """64 train pairs, validated on the same 64 pairs (for overfitting tests)."""
    return preprocess_slice(
        tmp_path_factory.mktemp("overfit") / "data", multi30k, multi30k_spm, 64, 64, valid_from_train=True
    )


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory: pytest.TempPathFactory, small_data: Path) -> Path:
    """A tiny model trained for 150 steps on 2,000 Multi30k pairs (a few seconds); RUN_DIR with average.pt."""
    from mtkit.recipe import resolve_recipe

    recipe = resolve_recipe(
        None,
        "tiny",
        [
            "train.max_steps=150",
            "train.warmup_steps=30",
            "train.lr=3e-3",
            "train.max_tokens=2048",
            "train.save_interval_steps=50",
            "train.save_interval_minutes=0",
            "train.average_last=2",
            "train.log_interval=50",
        ],
        vocab_size=1000,
    )
    return trained_once(tmp_path_factory, "tiny-run", lambda run: train_fixture(small_data, run, recipe))


OVERFIT = [
    "model.dropout=0.0",
    "train.label_smoothing=0.0",
    "train.max_steps=160",
    "train.lr=3e-3",
    "train.warmup_steps=30",
    "train.save_interval_minutes=0",
    "train.average_last=1",
    "train.log_interval=10",
]
# overfit_run's and de_en_run's: OVERFIT in 100 updates at twice its peak rate. On the 64 pairs this ends at a lower
# loss than OVERFIT's 160 updates (validation loss 0.015 against 0.021, 2-core Zen 4) in 5/8 of the time.
OVERFIT_64 = [
    *(item for item in OVERFIT if not item.startswith(("train.max_steps=", "train.lr=", "train.warmup_steps="))),
    "train.max_steps=100",
    "train.lr=6e-3",
    "train.warmup_steps=20",
]


@pytest.fixture(scope="session")
def overfit_run(tmp_path_factory: pytest.TempPathFactory, overfit_data: Path) -> Path:
    """A tiny model trained to memorize 64 Multi30k pairs."""
    from mtkit.recipe import resolve_recipe

    recipe = resolve_recipe(None, "tiny", OVERFIT_64, vocab_size=1000)
    return trained_once(tmp_path_factory, "overfit-run", lambda run: train_fixture(overfit_data, run, recipe))


@pytest.fixture(scope="session")
def de_en_run(tmp_path_factory: pytest.TempPathFactory, overfit_data: Path, multi30k_spm: Path) -> Path:
    """overfit_run's reverse: a tiny German -> English model that memorized the same 64 pairs (a second language
    pair for serving several models; with overfit_run, two models that agree on those pairs)."""
    from mtkit.corpus.config import PreprocessConfig
    from mtkit.corpus.preprocess import preprocess
    from mtkit.recipe import resolve_recipe

    raw = overfit_data.parent / f"{overfit_data.name}-raw"  # its text files, written by preprocess_slice

    def build(run: Path) -> None:
        data = tmp_path_factory.mktemp("de-en") / "data"
        spm = str(multi30k_spm)
        preprocess(
            PreprocessConfig("de", "en", train=str(raw / "train"), valid=str(raw / "valid"), spm_model=spm), data
        )
        train_fixture(data, run, resolve_recipe(None, "tiny", OVERFIT_64, vocab_size=1000))

    return trained_once(tmp_path_factory, "de-en-run", build)


MULTILINGUAL_SENTENCES = 16  # English Multi30k val captions en_de_fr_run memorized into German and into French


def multilingual_lines(multi30k: Path, n: int) -> dict[str, list[str]]:
    """The first n Multi30k val captions in en, de and fr: line i of each describes the same image."""
    return {
        "en": read_gz_lines(multi30k / "val.en.gz", n),
        "de": read_gz_lines(multi30k / "val.de.gz", n),
        "fr": read_gz_lines(ROOT / "tests" / "data" / "multi30k" / "val-300.fr.gz", n),
    }


@pytest.fixture(scope="session")
def en_de_fr_spm(tmp_path_factory: pytest.TempPathFactory, multi30k: Path) -> Path:
    """A vocabulary of 600 with the pieces >>de<< and >>fr<< (ids 4 and 5), trained on the first 300 Multi30k val
    captions in en, de and fr."""
    from mtkit.corpus.tokenizer_training import train_tokenizer

    text = multilingual_lines(multi30k, 300)
    return train_tokenizer(
        text["en"] + text["de"] + text["fr"],
        tmp_path_factory.mktemp("en-de-fr-spm") / "spm.model",
        vocab_size=600,
        user_defined_symbols=[">>de<<", ">>fr<<"],
    )


@pytest.fixture(scope="session")
def en_de_fr_run(tmp_path_factory: pytest.TempPathFactory, multi30k: Path, en_de_fr_spm: Path) -> Path:
    """A tiny multilingual model that memorized 16 English Multi30k val captions into German and into French:
    preprocessed as two corpora (en->de, en->fr) with language tokens, so every source starts with its target's
    >>de<< or >>fr<< id, and trained on both. The sources of the two corpora are the same sentences: only the code
    tells the model which language to answer in."""
    from mtkit.corpus.config import PreprocessConfig
    from mtkit.corpus.preprocess import preprocess
    from mtkit.recipe import resolve_recipe

    def build(run: Path) -> None:
        text, raw = multilingual_lines(multi30k, MULTILINGUAL_SENTENCES), tmp_path_factory.mktemp("en-de-fr-raw")
        for lang in ("de", "fr"):
            for side in ("en", lang):
                (raw / f"{lang}.{side}").write_text("".join(line + "\n" for line in text[side]), encoding="utf-8")
        corpora = [{"name": lang, "train": str(raw / lang), "target_lang": lang} for lang in ("de", "fr")]
        data = tmp_path_factory.mktemp("en-de-fr") / "data"
        manifest = preprocess(PreprocessConfig(source_lang="en", spm_model=str(en_de_fr_spm), corpora=corpora), data)
        train_fixture(data, run, resolve_recipe(None, "tiny", OVERFIT, vocab_size=manifest["vocab_size"]))

    return trained_once(tmp_path_factory, "en-de-fr-run", build)


@pytest.fixture(scope="session")
def foreign_spm(tmp_path_factory: pytest.TempPathFactory, multi30k: Path) -> Path:
    """A sentencepiece model made as outside mtkit, with sentencepiece's defaults (unigram, NFKC, no byte
    fallback, unk 0, bos 1, eos 2, no pad): vocab 1000, first 3000 train pairs."""
    import io

    import sentencepiece as spm

    lines = read_gz_lines(multi30k / "train.en.gz", 3000) + read_gz_lines(multi30k / "train.de.gz", 3000)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, vocab_size=1000, minloglevel=2)
    path = tmp_path_factory.mktemp("foreign-spm") / "default-ids.model"
    path.write_bytes(model.getvalue())
    return path


@pytest.fixture(scope="session")
def foreign_data(tmp_path_factory: pytest.TempPathFactory, multi30k: Path, foreign_spm: Path) -> Path:
    """2,000 train / 200 valid Multi30k pairs preprocessed with `foreign_spm`."""
    return preprocess_slice(tmp_path_factory.mktemp("foreign") / "data", multi30k, foreign_spm, 2000, 200)


@pytest.fixture(scope="session")
def foreign_run(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    """A tiny model trained for 40 steps on `foreign_data`; made once for both passes of `make test`, as the other
    runs are (the forced-AVX2 pass trained it again: 40 s of its 2 minutes), its data preprocessed only to train."""
    from mtkit.corpus.binarized import read_manifest
    from mtkit.recipe import resolve_recipe

    def build(run: Path) -> None:
        data = request.getfixturevalue("foreign_data")
        recipe = resolve_recipe(
            None,
            "tiny",
            [
                "train.max_steps=40",
                "train.warmup_steps=10",
                "train.lr=3e-3",
                "train.max_tokens=2048",
                "train.save_interval_steps=20",
                "train.save_interval_minutes=0",
                "train.average_last=2",
                "train.log_interval=20",
            ],
            vocab_size=read_manifest(data)["vocab_size"],
        )
        train_fixture(data, run, recipe)

    return trained_once(tmp_path_factory, "foreign-run", build)


def _process_state() -> tuple:
    import gc
    import signal

    return signal.getsignal(signal.SIGPIPE), signal.getsignal(signal.SIGTERM), gc.isenabled(), gc.get_freeze_count()


@pytest.fixture(autouse=True)
def _process_state_is_kept():
    """A command run in this process (CliRunner) must leave pytest as it found it: with SIGPIPE back at its
    default a later test's write to a closed socket or pipe would kill the whole run without a word."""
    before = _process_state()
    yield
    assert _process_state() == before, "this test changed the test process's signal handlers or garbage collector"


@pytest.fixture(autouse=True)
def _trainers_are_killed():
    """A `mtkit train` subprocess (tests.reliability.common.Trainer) still running when its test ends, because an
    assertion failed before the test reaped it, is killed: it would train on beside the next tests."""
    yield
    import sys

    common = sys.modules.get("tests.reliability.common")
    if common is not None:
        while common.STARTED:
            common.STARTED.pop().kill()


@pytest.fixture
def arm_faults(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], None]:
    """Arms fault points (mtkit/faults.py) in this process, as MTKIT_FAULTS="nan_steps=3,4;oom_steps=6" arms them in
    a new one (a subprocess test sets that variable instead): each call replaces what was armed, "" disarms them all,
    and the end of the test disarms them."""
    from mtkit import faults

    def arm(spec: str) -> None:
        monkeypatch.setattr(faults, "_armed", faults.parse(spec))

    return arm


MULTILINGUAL_SLICES = {"de": (0, 240), "fr": (240, 360)}  # Multi30k train lines of each direction's corpus


def write_lines(prefix: Path, lang: str, lines: list[str]) -> None:
    Path(f"{prefix}.{lang}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")


@pytest.fixture(scope="session")
def multilingual_data(tmp_path_factory: pytest.TempPathFactory, multi30k: Path) -> Path:
    """Two corpora in two directions, preprocessed with language tokens (two target languages): en->de (240 Multi30k
    train pairs, corpus "de") and en->fr (the next 120, corpus "fr", weight 2, tagged <bt>), 40 valid pairs per
    direction, a vocabulary of 600 trained on them."""
    from mtkit.corpus.config import PreprocessConfig
    from mtkit.corpus.preprocess import preprocess

    raw = tmp_path_factory.mktemp("multilingual-raw")
    english = read_gz_lines(multi30k / "train.en.gz", 360)
    for lang, (start, end) in MULTILINGUAL_SLICES.items():
        write_lines(raw / lang, "en", english[start:end])
        write_lines(raw / lang, lang, read_gz_lines(multi30k / f"train.{lang}.gz", end)[start:])
    for lang in ("en", "de", "fr"):
        write_lines(raw / "valid", lang, read_gz_lines(multi30k / f"val.{lang}.gz", 40))
    cfg = PreprocessConfig(
        source_lang="en",
        valid=str(raw / "valid"),
        vocab_size=600,
        corpora=[
            {"name": "de", "train": str(raw / "de"), "target_lang": "de"},
            {"name": "fr", "train": str(raw / "fr"), "target_lang": "fr", "weight": 2.0, "tag": "<bt>"},
        ],
    )
    out = tmp_path_factory.mktemp("multilingual") / "data"
    preprocess(cfg, out)
    return out
