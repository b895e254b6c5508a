"""Word alignments of a parallel corpus of tokenized lines with eflomal: both directions, symmetrized by
grow-diag-final-and, as Pharaoh lines (`0-0 1-2`), the same output for the same input and seed. eflomal is the
optional extra `mtkit[align]`, imported only when an alignment is asked for; nothing here imports torch.

eflomal 2.0.0 has no seed: its binary reads its seed from /dev/urandom, so two runs on the same input disagree (901
of 2,000 Multi30k lines). `align_pairs` runs a copy of the binary whose seed path is a file it writes with the seed,
on one OpenMP thread (the samplers' threads interleave differently from run to run and change the links too).
"""

from __future__ import annotations

import math
import os
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mtkit.errors import UserError, check
from mtkit.files import atomic_write, read_lines

INSTALL_HINT = "word alignments need eflomal, which is not installed: pip install 'mtkit[align]'"
# The binary's seed file, replaced in a copy by a relative path of the same length (a C string in place).
SYSTEM_SEED = b"/dev/urandom\0"
OWN_SEED = b"./mtkit.seed\0"

Link = tuple[int, int]


@dataclass(frozen=True)
class AlignConfig:
    """How eflomal aligns: its defaults (HMM with fertility, 3 samplers), and the seed that makes runs repeat."""

    seed: int = 1
    samplers: int = 3
    null_prior: float = 0.2
    rel_iterations: float = 1.0

    def __post_init__(self) -> None:
        check(0 <= self.seed < 2**64, f"seed: {self.seed} is not in [0, 2**64)")
        check(self.samplers >= 1, f"samplers: {self.samplers} must be at least 1")
        check(0.0 < self.null_prior < 1.0, f"null_prior: {self.null_prior} must be in (0, 1)")
        check(self.rel_iterations > 0, f"rel_iterations: {self.rel_iterations} must be positive")


def iterations(n_pairs: int, rel_iterations: float) -> tuple[int, int, int]:
    """IBM1, HMM and fertility iterations as eflomal's own wrapper chooses them for model 3 (fewer for more data)."""
    n = max(2, int(round(rel_iterations * 5000 / math.sqrt(max(n_pairs, 1)))))
    return max(2, n // 4), n // 4, n


def _eflomal() -> object:
    """The eflomal package, or a one-line UserError naming the extra that installs it."""
    try:
        import eflomal
    except ImportError:
        raise UserError(INSTALL_HINT) from None
    return eflomal


def _seeded_binary(eflomal: object, workdir: Path, seed: int) -> Path:
    """A copy of eflomal's binary in `workdir` that reads its 8-byte seed from ./mtkit.seed, written there."""
    original = Path(eflomal.__file__).parent / "bin" / "eflomal"  # type: ignore[attr-defined]
    code = original.read_bytes()
    # Pinned to eflomal 2.0.0 (one such string); a build without it cannot be seeded, so it is refused, not run.
    check(code.count(SYSTEM_SEED) == 1, f"{original}: not the eflomal 2.0.0 binary mtkit seeds; {INSTALL_HINT}")
    binary = workdir / "eflomal"
    binary.write_bytes(code.replace(SYSTEM_SEED, OWN_SEED))
    binary.chmod(0o755)
    (workdir / OWN_SEED[:-1].decode()).write_bytes(seed.to_bytes(8, "little"))
    return binary


def _read_links(path: Path, n_pairs: int) -> list[list[Link]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    lines += [""] * (n_pairs - len(lines))  # eflomal may leave a final empty pair's line out
    return [parse_pharaoh(line) for line in lines[:n_pairs]]


def align_pairs(
    src: Sequence[str], tgt: Sequence[str], cfg: AlignConfig | None = None
) -> tuple[list[list[Link]], list[list[Link]]]:
    """Forward and reverse links of each pair of whitespace-tokenized lines, both as (source, target) indexes."""
    cfg = cfg or AlignConfig()
    check(len(src) == len(tgt), f"{len(src)} source lines but {len(tgt)} target lines")
    eflomal = _eflomal()
    with tempfile.TemporaryDirectory(prefix="mtkit-align-") as tmp:
        workdir = Path(tmp)
        binary = _seeded_binary(eflomal, workdir, cfg.seed)
        for name, lines in (("src", src), ("tgt", tgt)):
            with open(workdir / name, "wb") as handle:
                eflomal.to_eflomal_text_file([line.strip() for line in lines], handle)  # type: ignore[attr-defined]
        ibm1, hmm, fertility = iterations(len(src), cfg.rel_iterations)
        cmd = [str(binary), "-m", "3", "-s", "src", "-t", "tgt", "-n", str(cfg.samplers), "-N", str(cfg.null_prior)]
        cmd += ["-1", str(ibm1), "-2", str(hmm), "-3", str(fertility), "-q", "-f", "fwd", "-r", "rev"]
        env = {**os.environ, "OMP_NUM_THREADS": "1"}  # more threads make the samplers' results differ run to run
        done = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"eflomal exited with {done.returncode}: {done.stderr.strip()[-500:]}")
        return _read_links(workdir / "fwd", len(src)), _read_links(workdir / "rev", len(src))


def grow_diag_final_and(fwd: Sequence[Link], rev: Sequence[Link]) -> list[Link]:
    """Koehn et al.'s grow-diag-final-and: the intersection, grown by neighbours (diagonals too) in the union, then
    each union link whose source and target words are both still unaligned. Sorted (source, target) links."""
    union, links = set(fwd) | set(rev), set(fwd) & set(rev)
    src_done, tgt_done = {i for i, _ in links}, {j for _, j in links}
    neighbours = [(-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1)]
    grown = True
    while grown:
        grown = False
        for i, j in sorted(links):
            for di, dj in neighbours:
                new = (i + di, j + dj)
                if new in union and new not in links and (new[0] not in src_done or new[1] not in tgt_done):
                    links.add(new)
                    src_done.add(new[0])
                    tgt_done.add(new[1])
                    grown = True
    for direction in (fwd, rev):  # final-and: a link of either direction joining two unaligned words
        for i, j in sorted(direction):
            if i not in src_done and j not in tgt_done:
                links.add((i, j))
                src_done.add(i)
                tgt_done.add(j)
    return sorted(links)


def parse_pharaoh(line: str) -> list[Link]:
    """`0-0 1-2` as [(0, 0), (1, 2)]."""
    return [(int(i), int(j)) for i, j in (link.split("-") for link in line.split())]


def pharaoh(links: Sequence[Link]) -> str:
    """[(0, 0), (1, 2)] as `0-0 1-2`."""
    return " ".join(f"{i}-{j}" for i, j in links)


def align(src: Sequence[str], tgt: Sequence[str], cfg: AlignConfig | None = None) -> list[list[Link]]:
    """Each pair's symmetrized links (grow-diag-final-and of both directions)."""
    fwd, rev = align_pairs(src, tgt, cfg)
    return [grow_diag_final_and(f, r) for f, r in zip(fwd, rev, strict=True)]


def align_files(src_path: str | Path, tgt_path: str | Path, out: str | Path, cfg: AlignConfig | None = None) -> int:
    """Align two tokenized text files (plain or .gz) line by line and write Pharaoh lines to `out` atomically (a
    killed run leaves no partial file). Returns the number of pairs."""
    src, tgt = list(read_lines(src_path)), list(read_lines(tgt_path))
    check(len(src) == len(tgt), f"{src_path}: {len(src)} lines but {tgt_path}: {len(tgt)} lines")
    links = align(src, tgt, cfg)
    with atomic_write(out, "w") as handle:
        handle.write("".join(pharaoh(line) + "\n" for line in links))
    return len(links)
