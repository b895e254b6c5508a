"""Back-translation (mtkit.bulk.synthetic, `mtkit back-translate`) with the tiny German -> English model: outputs
line-aligned with the input and the copied side byte for byte the input, beam output as `mtkit translate --no-guard`
prints it; and, sampling with the English -> German tiny_run, a run killed half-way that goes on to exactly the
bytes of a run never stopped; with a glossary, each line by mtkit translate's line path, the targets put in and the
glossary part of what a resumed run must share."""

from __future__ import annotations

import dataclasses
import json
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from mtkit.bulk import resumable
from mtkit.bulk.synthetic import SyntheticCorpusConfig, write_synthetic_corpus
from mtkit.engines.config import EngineConfig
from mtkit.errors import LockedError, UserError
from mtkit.faults import FAULTS_ENV
from mtkit.search.config import SearchOverrides
from mtkit.text.glossary import load_glossary
from mtkit.text.protect import ProtectConfig
from tests.conftest import read_gz_lines, run_mtkit_in_process
from tests.reliability.common import cli_env, mtkit_command, run_cli


@pytest.fixture(scope="module")
def mono(tmp_path_factory: pytest.TempPathFactory, multi30k: Path) -> Path:
    """40 German lines of Multi30k's validation set, one of them empty and one only spaces."""
    lines = read_gz_lines(multi30k / "val.de.gz", 38)
    lines[4:4] = [""]
    lines[20:20] = ["   "]
    path = tmp_path_factory.mktemp("mono") / "mono.de"
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def mono_en(tmp_path_factory: pytest.TempPathFactory, multi30k: Path) -> Path:
    """`mono`'s layout in English (38 Multi30k validation lines, an empty one and one only spaces), for the English ->
    German tiny_run: the exactness tests sample from it, whose distributions are flatter than those of de_en_run (a
    model that memorized 64 pairs), so seeded draws decide more tokens; and the AVX2 pass of `make test` then needs
    no de_en_run."""
    lines = read_gz_lines(multi30k / "val.en.gz", 38)
    lines[4:4] = [""]
    lines[20:20] = ["   "]
    path = tmp_path_factory.mktemp("mono-en") / "mono.en"
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def config(
    run: Path,
    mono: Path,
    out: Path,
    engine: str = "ctranslate2",
    chunk_lines: int = 8,
    ct2_search: str = "native",
    overwrite: bool = False,
    **search: object,
) -> SyntheticCorpusConfig:
    """`mtkit back-translate` on the CPU, with its defaults (CTranslate2's native search) and `search`'s options."""
    engine_cfg = EngineConfig(engine=engine, device="cpu", ct2_search=ct2_search)
    return SyntheticCorpusConfig(
        run, mono, out, chunk_lines, engine_cfg, SearchOverrides(**search), overwrite=overwrite
    )


def test_outputs_are_line_aligned_and_the_copy_is_the_input(de_en_run: Path, mono: Path, tmp_path: Path) -> None:
    summary = write_synthetic_corpus(config(de_en_run, mono, tmp_path / "bt", seed=3))
    assert summary == {
        "read": 40,
        "written": 40,
        "empty": 2,
        "resumed_from": 0,
        "engine": "ctranslate2",
        "search": "sampling",
        "outputs": [str(tmp_path / "bt.en"), str(tmp_path / "bt.de")],
    }
    assert (tmp_path / "bt.de").read_bytes() == mono.read_bytes()
    synthetic = (tmp_path / "bt.en").read_text(encoding="utf-8").split("\n")
    assert len(synthetic) == 41 and synthetic[-1] == ""  # 40 lines, each ended by "\n"
    assert synthetic[4] == synthetic[20] == "" and all(synthetic[:4]) and all(synthetic[21:40])
    assert not (tmp_path / "bt.progress.json").exists()
    # Finished outputs are replaced only when asked.
    with pytest.raises(UserError, match=r"bt.en exists and no bt.progress.json says how far it got; --overwrite"):
        write_synthetic_corpus(config(de_en_run, mono, tmp_path / "bt", seed=3))
    again = write_synthetic_corpus(config(de_en_run, mono, tmp_path / "bt", seed=3, overwrite=True))
    assert again["written"] == 40 and (tmp_path / "bt.en").read_text(encoding="utf-8") == "\n".join(synthetic)


@pytest.mark.parametrize("engine", ["torch", "ctranslate2"])
def test_beam_output_is_what_mtkit_translate_prints(de_en_run: Path, mono: Path, tmp_path: Path, engine: str) -> None:
    """torch: in chunks of 7 lines (its lines do not depend on the batch); CTranslate2's own search, the default of
    back-translation, in one chunk, as `mtkit translate` batches the 40 lines (its lines can depend on the batch)."""
    write_synthetic_corpus(
        config(de_en_run, mono, tmp_path / "bt", engine, chunk_lines=7 if engine == "torch" else 100, beam=3)
    )
    search = ["--ct2-search", "native"] if engine == "ctranslate2" else []
    printed = run_mtkit_in_process(
        "translate",
        de_en_run,
        "--engine",
        engine,
        *search,
        "--beam",
        "3",
        "--device",
        "cpu",
        "--input",
        mono,
        "--quiet",
        "--no-guard",  # back-translation writes the model's best as it is; translate guards it by default
    )
    assert printed.returncode == 0, printed.stderr
    assert (tmp_path / "bt.en").read_text(encoding="utf-8") == printed.stdout


def interrupt_after(monkeypatch: pytest.MonkeyPatch, chunks: int) -> None:
    """The next run stops (KeyboardInterrupt) once `chunks` chunks are recorded."""
    append = resumable.ResumableOutputs.append
    recorded = []

    def append_then_stop(self: resumable.ResumableOutputs, texts: list[str], lines: int) -> None:
        append(self, texts, lines)
        recorded.append(lines)
        if len(recorded) == chunks:
            raise KeyboardInterrupt

    monkeypatch.setattr(resumable.ResumableOutputs, "append", append_then_stop)


def cut_chunk(prefix: Path) -> None:
    """What a kill inside a write leaves: bytes of a chunk that no state records."""
    for lang in ("en", "de"):
        with open(f"{prefix}.{lang}", "ab") as handle:
            handle.write(b"halbe Zei")


@pytest.mark.exactness
def test_torch_sampling_goes_on_to_the_same_bytes(
    tiny_run: Path, mono_en: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_synthetic_corpus(config(tiny_run, mono_en, tmp_path / "whole", "torch", seed=5, top_k=10))
    with monkeypatch.context() as patch:
        interrupt_after(patch, 2)
        with pytest.raises(KeyboardInterrupt):
            write_synthetic_corpus(config(tiny_run, mono_en, tmp_path / "bt", "torch", seed=5, top_k=10))
    cut_chunk(tmp_path / "bt")
    summary = write_synthetic_corpus(config(tiny_run, mono_en, tmp_path / "bt", "torch", seed=5, top_k=10))
    assert summary["resumed_from"] == 16 and summary["written"] == 24
    for lang in ("de", "en"):
        assert Path(f"{tmp_path}/bt.{lang}").read_bytes() == Path(f"{tmp_path}/whole.{lang}").read_bytes()


def test_a_state_of_other_options_or_input_is_refused(
    de_en_run: Path, mono: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patch:
        interrupt_after(patch, 1)
        with pytest.raises(KeyboardInterrupt):
            write_synthetic_corpus(config(de_en_run, mono, tmp_path / "bt", seed=5))
    for options, differs in [
        ({"seed": 6}, "seed"),
        ({"seed": 5, "top_k": 10}, "top_k"),
        ({"seed": 5, "chunk_lines": 4}, "chunk_lines"),
        ({"seed": 5, "ct2_search": "exact"}, "ct2_search"),
        ({"beam": 2}, "beam, sampling, seed"),
    ]:
        with pytest.raises(UserError, match=rf"bt.progress.json: an unfinished job with other {differs} wrote"):
            write_synthetic_corpus(config(de_en_run, mono, tmp_path / "bt", **options))
    changed = tmp_path / "mono.de"
    changed.write_bytes(mono.read_bytes() + b"Noch eine Zeile.\n")
    with pytest.raises(UserError, match="with other input wrote"):
        write_synthetic_corpus(config(de_en_run, changed, tmp_path / "bt", seed=5))
    assert write_synthetic_corpus(config(de_en_run, mono, tmp_path / "bt", seed=5))["resumed_from"] == 8
    with pytest.raises(UserError, match="--beam N is beam search; --sampling, --top-k"):
        config(de_en_run, mono, tmp_path / "bt", beam=2, top_k=10)
    changed.write_bytes(b"Ein Hund.\nein \xff Byte\n")
    with pytest.raises(UserError, match=r"mono.de:2: invalid UTF-8"):
        write_synthetic_corpus(config(de_en_run, changed, tmp_path / "bad"))


def state_lines(path: Path) -> int:
    try:
        return json.loads(path.read_text(encoding="utf-8"))["done"]
    except (OSError, ValueError):
        return 0  # not written yet, or being replaced


@pytest.mark.exactness
def test_killed_run_goes_on_to_the_bytes_of_a_run_never_stopped(tiny_run: Path, mono_en: Path, tmp_path: Path) -> None:
    """kill -9 after a recorded chunk (a second run on the same PREFIX, meanwhile, is refused), a cut write, then
    the same command: the bytes of an uninterrupted run, sampling with a seed on CTranslate2."""
    options = ["--seed", "7", "--chunk-lines", "8", "--device", "cpu"]
    write_synthetic_corpus(config(tiny_run, mono_en, tmp_path / "whole", seed=7))
    command = mtkit_command("back-translate", tiny_run, "--input", mono_en, "--out", tmp_path / "bt", *options)
    first = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=cli_env({FAULTS_ENV: "backtranslate_pause_ms=1500"}),
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while state_lines(tmp_path / "bt.progress.json") < 8:
            if first.poll() is not None or time.monotonic() > deadline:
                first.kill()
                pytest.fail(f"no chunk recorded: {first.communicate()[1].decode()}")
            time.sleep(0.02)
        second = run_cli(*command[3:], "--json")
        assert second.returncode == LockedError.exit_code
        assert f"{tmp_path / 'bt'}: back-translation is locked by pid {first.pid}" in second.stderr
        assert first.poll() is None, "the first run ended before it was killed"
        first.send_signal(signal.SIGKILL)
        assert first.wait(timeout=30) == -signal.SIGKILL
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
        first.stderr.close()  # type: ignore[union-attr]
    done = state_lines(tmp_path / "bt.progress.json")
    assert 8 <= done < 40
    cut_chunk(tmp_path / "bt")
    resumed = run_cli(*command[3:], "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["resumed_from"] == done
    for lang in ("de", "en"):
        assert Path(f"{tmp_path}/bt.{lang}").read_bytes() == Path(f"{tmp_path}/whole.{lang}").read_bytes()
    assert not (tmp_path / "bt.progress.json").exists()


def test_a_multilingual_reverse_model_back_translates_into_the_language_asked(
    en_de_fr_run: Path, multi30k: Path, tmp_path: Path
) -> None:
    """--target-lang picks the code, as mtkit translate does, and names the output; without it a model of two
    codes refuses in one line."""
    from tests.conftest import MULTILINGUAL_SENTENCES, multilingual_lines

    mono = tmp_path / "mono.en"
    mono.write_text("\n".join(multilingual_lines(multi30k, MULTILINGUAL_SENTENCES)["en"]) + "\n", encoding="utf-8")
    write_synthetic_corpus(config(en_de_fr_run, mono, tmp_path / "bt", "torch", beam=2, target_lang="fr"))
    printed = run_cli(
        "translate", en_de_fr_run, "--beam", "2", "--target-lang", "fr", "--device", "cpu", "--input", mono, "--quiet"
    )
    assert printed.returncode == 0 and (tmp_path / "bt.fr").read_text(encoding="utf-8") == printed.stdout
    with pytest.raises(UserError, match="--target-lang: this model translates into de, fr; choose one"):
        write_synthetic_corpus(config(en_de_fr_run, mono, tmp_path / "bt2", "torch", beam=2))


OLD_RUN = Path(__file__).resolve().parents[1] / "data" / "run-0681275"  # en->de, a tiny model that cannot copy
TERM_LINES = [
    "A man in a red shirt runs.",
    "",
    "Two dogs play in the snow.",
    "A woman in a red shirt walks in the snow.",
    "Ticket ACME-12 is done.",
    "A little girl climbs.",
]


def test_distill_with_a_glossary_puts_its_targets_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = tmp_path / "run"
    shutil.copytree(OLD_RUN, run, ignore=shutil.ignore_patterns("expected"))
    source = tmp_path / "train.en"
    source.write_text("".join(f"{line}\n" for line in TERM_LINES), encoding="utf-8")
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("red shirt\tRothemd\nsnow\tPulverschnee\n", encoding="utf-8")
    common = ("distill", run, "-i", source, "--engine", "torch", "--chunk-lines", "4", "--json")
    plain = run_mtkit_in_process(*common, "-o", tmp_path / "plain")
    assert plain.returncode == 0, plain.stderr
    assert "terms" not in json.loads(plain.stdout)  # without a glossary the lines go as they are, as before
    done = run_mtkit_in_process(*common, "-o", tmp_path / "terms", "--glossary", glossary, "--protect", r"ACME-\d+")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["term_method"], summary["terms"], summary["terms_applied"]) == ("replace", 4, 4)
    out = (tmp_path / "terms.de").read_text(encoding="utf-8").splitlines()
    before = (tmp_path / "plain.de").read_text(encoding="utf-8").splitlines()
    assert out[0].count("Rothemd") == 1 and out[2].count("Pulverschnee") == 1 and out[1] == ""
    assert out[3].count("Rothemd") == 1 and out[3].count("Pulverschnee") == 1 and out[4].count("ACME-12") == 1
    assert out[5] == before[5]  # a line without a term or a span is translated as it was
    assert (tmp_path / "terms.en").read_text(encoding="utf-8") == source.read_text(encoding="utf-8")
    bad = run_mtkit_in_process(*common, "-o", tmp_path / "bad", "--glossary", glossary, "--term-method", "hints")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "error: --term-method must be one of placeholder, inline, check-first, check-first-inline, guided, replace; "
        "got 'hints'"
    ]
    # the glossary is part of a run's identity: a resumed run with another (or none) is refused
    cfg = SyntheticCorpusConfig(
        run,
        source,
        tmp_path / "kept",
        2,
        EngineConfig(engine="torch"),
        glossary=load_glossary(glossary),
        glossary_file=glossary,
        protect=ProtectConfig(patterns=(r"ACME-\d+",)),
        beam_by_default=True,
    )
    with monkeypatch.context() as patch:
        interrupt_after(patch, 1)
        with pytest.raises(KeyboardInterrupt):
            write_synthetic_corpus(cfg)
    for changed in (
        {"term_method": "placeholder"},
        {"glossary": None, "glossary_file": None, "protect": ProtectConfig()},
    ):
        with pytest.raises(UserError, match="kept.progress.json: an unfinished job with other .*term_method"):
            write_synthetic_corpus(dataclasses.replace(cfg, **changed))
    glossary.write_text("red shirt\tRothemd\n", encoding="utf-8")
    with pytest.raises(UserError, match="an unfinished job with other glossary wrote"):
        write_synthetic_corpus(dataclasses.replace(cfg, glossary=load_glossary(glossary)))
