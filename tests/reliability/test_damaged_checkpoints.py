"""100 damaged checkpoint files: every one is a one-line UserError from load_checkpoint, never another
exception; through the CLI (translate, average) they exit 2 without a traceback."""

from __future__ import annotations

import gzip
import hashlib
import io
import pickle
import random
import shutil
import zipfile
from collections import Counter
from pathlib import Path

import torch

from mtkit.errors import UserError
from mtkit.runs.checkpoint import checksum_trailer, content_sha256, load_checkpoint
from mtkit.runs.checkpoint_files import list_checkpoints
from tests.reliability.common import differing_tensors, record, run_cli


def flip_bytes(data: bytes, rng: random.Random, count: int, low: int = 0, high: int | None = None) -> bytes:
    raw = bytearray(data)
    for _ in range(count):
        raw[rng.randrange(low, high or len(raw))] ^= rng.randint(1, 255)
    return bytes(raw)


def saved(value: object) -> bytes:
    buffer = io.BytesIO()
    torch.save(value, buffer)
    return buffer.getvalue()


def zipped(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def signed(value: object) -> bytes:
    """torch.save bytes followed by their correct checksum trailer."""
    data = saved(value)
    return data + checksum_trailer(hashlib.sha256(data).hexdigest())


def foreign_files(good: dict, good_trailer: bytes) -> list[bytes]:
    """torch.save files that are not (valid) mtkit checkpoints: 15 of them."""
    payload = good["payload"]
    altered = {**payload, "step": payload["step"] + 1}
    tensor_changed = {**payload, "model": {**payload["model"]}}
    first = next(iter(tensor_changed["model"]))
    tensor_changed["model"][first] = tensor_changed["model"][first] + 1
    newer = {**payload, "version": 99}
    version1 = {**payload, "version": 1}  # the format before the checksum trailer: a content hash inside
    return [
        saved(x)
        for x in (
            {"weights": torch.zeros(3)},
            torch.ones(2, 2),
            [1, 2, 3],
            None,
            "payload",
            payload["model"],  # a bare state dict
            {"payload": "not a dict"},
            {"payload": payload},  # checksum missing
            {"payload": {**version1, "step": 0}, "sha256": content_sha256(version1)},  # version 1, a value changed
            {1: 2},
        )
    ] + [
        signed({"payload": {**payload, "format": "fairseq"}}),
        saved({"payload": altered}) + good_trailer,  # a plain value changed
        saved({"payload": tensor_changed}) + good_trailer,  # one tensor changed
        signed({"payload": newer}),  # a future version
        saved({"payload": payload}) + checksum_trailer("0" * 64),
    ]


def damaged_files(good_bytes: bytes, rng: random.Random) -> list[tuple[str, bytes]]:
    """100 (kind, content) pairs, none a valid mtkit checkpoint."""
    good = torch.load(io.BytesIO(good_bytes), weights_only=True)
    size = len(good_bytes)
    files = [("truncated", good_bytes[: rng.randrange(size)]) for _ in range(25)]
    files += [("byte flips", flip_bytes(good_bytes, rng, rng.randint(1, 8))) for _ in range(25)]
    files += [("empty", b"")] * 5
    files += [("random bytes", rng.randbytes(rng.randint(1, 100_000))) for _ in range(10)]
    files += [("random after a zip magic", b"PK\x03\x04" + rng.randbytes(rng.randint(0, 5000))) for _ in range(5)]
    files += [("foreign torch.save", data) for data in foreign_files(good, good_bytes[-78:])]
    other_zips = [
        {"hello.txt": b"hello"},
        {"archive/data.pkl": b"garbage"},
        {"archive/data.pkl": pickle.dumps({"a": 1})},
        {"archive/data.pkl": pickle.dumps({"payload": {}}, protocol=2), "archive/version": b"3\n"},
        {"a/data.pkl": rng.randbytes(100), "a/data/0": rng.randbytes(64)},
        {},
        {"x": b""},
        {"archive/byteorder": b"little"},
    ]
    files += [("zip of something else", zipped(members)) for members in other_zips]
    files += [
        ("gzip of a checkpoint", gzip.compress(good_bytes, compresslevel=1)),
        ("text", b"this is not a checkpoint\n"),
        ("pickle of a forbidden class", pickle.dumps(Counter(a=1))),
        ("plain pickle of the payload", pickle.dumps({"payload": {"format": "mtkit-checkpoint"}})),
        ("end of the zip directory zeroed", good_bytes[:-22] + bytes(22)),
        ("first kilobyte zeroed", bytes(1024) + good_bytes[1024:]),
        ("two checkpoints glued", good_bytes[: size // 2] + good_bytes[size // 2 + 1000 :]),
    ]
    return files


def test_100_damaged_checkpoints_are_detected(tmp_path: Path, reliability_run: Path) -> None:
    source = list_checkpoints(reliability_run)[-1]
    files = damaged_files(source.read_bytes(), random.Random(3))
    assert len(files) == 100
    detected, other = [], []
    for index, (kind, data) in enumerate(files):
        path = tmp_path / f"damaged_{index:03d}.pt"
        path.write_bytes(data)
        try:
            load_checkpoint(path)
        except UserError as exc:
            assert path.name in str(exc) and "\n" not in str(exc), (kind, str(exc))
            detected.append(kind)
        except Exception as exc:  # noqa: BLE001 - counted: anything but UserError is a failure
            other.append(f"{kind}: {type(exc).__name__}: {exc}")
    assert other == [] and len(detected) == 100, other
    record(
        "damaged_checkpoints",
        f"{len(detected)}/100 damaged checkpoints detected (UserError), {len(other)} other exceptions",
        detected=len(detected),
        other=len(other),
        kinds=dict(Counter(kind for kind, _ in files)),
    )


def test_flips_in_zip_metadata_never_give_a_wrong_payload(tmp_path: Path, reliability_run: Path) -> None:
    """A flip in the pickle or zip directory is either detected or harmless (the reader ignores that field)."""
    source = list_checkpoints(reliability_run)[-1]
    good_bytes, original = source.read_bytes(), load_checkpoint(source)
    rng = random.Random(4)
    outcome = Counter()
    for index in range(40):
        low, high = (0, 8192) if index % 2 else (len(good_bytes) - 3000, len(good_bytes))
        path = tmp_path / f"flip_{index:02d}.pt"
        path.write_bytes(flip_bytes(good_bytes, rng, 1, low, high))
        try:
            loaded = load_checkpoint(path)
        except UserError:
            outcome["detected"] += 1
            continue
        assert not differing_tensors(loaded, original)
        outcome["identical content"] += 1
    record(
        "metadata_flips",
        f"40 single-byte flips in zip/pickle metadata: {outcome['detected']} detected, "
        f"{outcome['identical content']} loaded with content identical to the original, 0 wrong",
    )


def test_damaged_checkpoints_through_the_cli(tmp_path: Path, reliability_run: Path) -> None:
    good = list_checkpoints(reliability_run)[-1].read_bytes()
    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(good[: len(good) // 3])
    foreign = tmp_path / "foreign.pt"
    torch.save({"model": torch.zeros(2)}, foreign)
    failures = []
    for path in (truncated, foreign):
        done = run_cli("translate", path, "--beam", "1", "--quiet", stdin=b"A man.\n")
        failures.append(done)
        assert done.stdout == "" and path.name in done.stderr
    run = tmp_path / "run"
    shutil.copytree(reliability_run, run)
    newest = list_checkpoints(run)[-1]
    newest.write_bytes(flip_bytes(good, random.Random(5), 4))
    average_before = (run / "average.pt").read_bytes()
    done = run_cli("average", run, "--last", "2")
    failures.append(done)
    assert newest.name in done.stderr and (run / "average.pt").read_bytes() == average_before
    for done in failures:
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    record(
        "damaged_checkpoints_cli",
        f"{len(failures)}/{len(failures)} CLI runs on damaged checkpoints (translate x2, "
        "average) exit 2 with one line, 0 tracebacks",
    )
