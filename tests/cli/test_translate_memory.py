"""`mtkit translate --memory` and `translate-file --memory`: Multi30k test lines whose pairs are in the memory come
out as the memory's targets (its references), every other line as without the memory; a memory of another language
pair, or none of that name, is a one-line error."""

from __future__ import annotations

from pathlib import Path

import sacrebleu

from tests.conftest import read_gz_lines, run_mtkit_in_process


def test_lines_the_memory_holds_are_its_targets(overfit_run: Path, multi30k: Path, tmp_path: Path) -> None:
    sources = read_gz_lines(multi30k / "test_2016_flickr.en.gz", 12)
    references = read_gz_lines(multi30k / "test_2016_flickr.de.gz", 12)
    held = range(0, 12, 2)
    (tmp_path / "m.tsv").write_text("".join(f"{sources[i]}\t{references[i]}\n" for i in held), encoding="utf-8")
    state = tmp_path / "state.sqlite3"
    imported = run_mtkit_in_process(
        "memory", "import", tmp_path / "m.tsv", "--name", "m", "--source-lang", "en", "--target-lang", "de",
        "--state", state,
    )  # fmt: skip
    assert imported.returncode == 0, imported.stdout
    (tmp_path / "in.en").write_text("\n".join(sources) + "\n", encoding="utf-8")
    plain = run_mtkit_in_process("translate", overfit_run, "-i", tmp_path / "in.en", "-q")
    used = run_mtkit_in_process(
        "translate", overfit_run, "-i", tmp_path / "in.en", "-q", "--memory", "m", "--state", state
    )
    assert plain.returncode == 0 and used.returncode == 0, used.stdout
    without, with_memory = plain.stdout.splitlines(), used.stdout.splitlines()
    for i in range(12):
        assert with_memory[i] == (references[i] if i in held else without[i]), i
    assert sacrebleu.corpus_bleu(with_memory, [references]).score >= sacrebleu.corpus_bleu(without, [references]).score
    (tmp_path / "doc.txt").write_text(sources[0] + "\n", encoding="utf-8")
    filed = run_mtkit_in_process(
        "translate-file", overfit_run, tmp_path / "doc.txt", "-o", tmp_path / "doc.de.txt", "--memory", "m",
        "--state", state,
    )  # fmt: skip
    assert filed.returncode == 0, filed.stdout
    assert (tmp_path / "doc.de.txt").read_text(encoding="utf-8").strip() == references[0]
    wrong = run_mtkit_in_process("translate", overfit_run, "-i", tmp_path / "in.en", "--memory", "x", "--state", state)
    assert wrong.returncode == 2 and "--memory x: no such memory" in wrong.stdout + wrong.stderr
