"""mtkit.corpus.filters: hand-made pairs for each filter (same text, letters of other scripts, a side in the other
language), unknown languages refused, and preprocess on real Multi30k pairs with injected bad ones: the manifest
counts what was injected, the valid set is untouched, and 1 and 2 workers write the same files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from mtkit.corpus import preprocess as preprocess_module
from mtkit.corpus.config import CleaningConfig, PreprocessConfig
from mtkit.corpus.filters import FILTER_REASONS, PairFilters, language_ok, same_text, scripts_ok, unexpected_letters
from mtkit.corpus.preprocess import preprocess
from mtkit.errors import UserError
from tests.conftest import MULTI30K, read_gz_lines
from tests.corpus.test_preprocess import decoded_split, write_pair

EN = [line.strip() for line in read_gz_lines(MULTI30K / "train.en.gz", 400)]
DE = [line.strip() for line in read_gz_lines(MULTI30K / "train.de.gz", 400)]


@pytest.fixture(scope="module")
def filters() -> PairFilters:
    return PairFilters.build("en", "de", CleaningConfig(filter_same=True, filter_scripts=True, filter_langid=True))


def test_same_text_ignores_case_and_spacing_only() -> None:
    src = ["A dog runs.", "A dog runs.", "Berlin", "A dog runs.", ""]
    tgt = ["a  DOG runs. ", "A dog runs!", "berlin", "Ein Hund rennt.", ""]
    assert same_text(src, tgt).tolist() == [True, False, True, False, True]


def test_letters_of_another_script_are_unexpected() -> None:
    german = ["Ein Hund läuft über die Straße.", "Ein Mann im Парк.", "Eine Frau in Αθήνα.", "Zwei Kinder und 𐌰."]
    assert scripts_ok(german, "de").tolist() == [True, False, False, False]
    russian = ["Собака бежит по улице.", "Новый iPhone за 1000 $.", "Мы в Αθήνα.", "Мы в 東京."]
    assert scripts_ok(russian, "ru").tolist() == [True, True, False, False]  # Latin names are every language's
    assert scripts_ok(["Сьогодні ґанок і обʼєкт.", "Я в Москві."], "uk").all()  # ʼ is a modifier letter
    assert scripts_ok(["東京タワーでラーメンを食べた。", "我们在北京。"], "ja").all()
    assert scripts_ok(["我们在北京。", "东京タワー"], "zh").tolist() == [True, False]
    assert scripts_ok(["Ένας σκύλος τρέχει.", "Ein Mann 12."], "el").all()


def test_emoji_digits_punctuation_and_symbols_are_never_letters() -> None:
    lines = [
        "Ein Hund 🐕🙂 – „Hallo“ «ok» ¿? 42 % 3½ € ™ ©",
        "5 µm, 1ª, ℃, 𝐀𝐁𝐂, 𝟙𝟚",
        "Ｆｕｌｌ ｗｉｄｔｈ ＡＢＣ",
        "👍🏽🇩🇪",
        "",
    ]
    assert scripts_ok(lines, "de").all()
    assert scripts_ok(lines, "ru").all()


def test_a_side_in_the_other_language_is_dropped(filters: PairFilters) -> None:
    assert filters.detector is not None
    assert language_ok(filters.detector, [DE[0], EN[0], "", "42 !"], "en").tolist() == [False, True, True, True]
    assert language_ok(filters.detector, [EN[1], DE[1]], "de").tolist() == [False, True]


def test_clean_multi30k_pairs_are_kept(filters: PairFilters) -> None:
    keep = np.ones(len(EN), dtype=bool)
    assert filters.narrow(EN, DE, keep) == dict.fromkeys(FILTER_REASONS, 0) and keep.all()


def test_each_pair_counts_under_the_first_filter_that_drops_it(filters: PairFilters) -> None:
    src = [EN[0], EN[1], "Ein Mann im Парк.", EN[2], DE[3], EN[4]]
    tgt = [DE[0], EN[1], "Ein Mann im Парк.", DE[2] + " Парк", DE[3], DE[4]]  # both same text and Cyrillic: same
    keep = np.array([True, True, True, True, True, False])  # the last already dropped by a length rule
    dropped = filters.narrow(src, tgt, keep)
    assert dropped == {"same_text": 3, "unexpected_script": 1, "wrong_language": 0}
    assert keep.tolist() == [True, False, False, False, False, False]
    off = PairFilters.build("en", "de", CleaningConfig(filter_same=False, filter_scripts=False, filter_langid=False))
    keep = np.ones(len(src), dtype=bool)
    assert off.narrow(src, tgt, keep) == dict.fromkeys(FILTER_REASONS, 0) and keep.all()


def test_a_language_a_filter_does_not_know_is_refused_or_for_scripts_turned_off(capsys: pytest.CaptureFixture) -> None:
    on = CleaningConfig(filter_scripts=True)
    assert PairFilters.build("en", "xx", on).cleaning.filter_scripts is False and on.filter_scripts
    assert "script filter does not know language 'xx': it is off" in capsys.readouterr().err
    with pytest.raises(UserError, match=r"script filter does not know language 'xx' .*--no-filter-scripts") as error:
        unexpected_letters("xx")
    assert "\n" not in str(error.value)
    with pytest.raises(UserError, match=r"language filter does not know language 'qq'.*--no-filter-langid"):
        PairFilters.build("qq", "de", CleaningConfig(filter_scripts=False, filter_langid=True))
    PairFilters.build("en", "xx", CleaningConfig(filter_scripts=False, filter_langid=False))  # turned off: accepted


def corpus_with_bad_pairs() -> tuple[list[str], list[str], dict[str, int]]:
    """300 Multi30k pairs with bad ones mixed in, and how many of each reason."""
    src, tgt = EN[:300], DE[:300]
    bad = {
        "same_text": [(EN[300], EN[300]), (EN[301], "  " + EN[301].upper().replace(" ", "  ")), (DE[302], DE[302])],
        "unexpected_script": [(EN[303], DE[303].replace(" ", " Москва ", 1)), (EN[304] + " 東京", DE[304])],
        "wrong_language": [(DE[305], DE[306]), (EN[307], EN[308]), (DE[309], EN[309]), (EN[310] + " 🙂", EN[311])],
    }
    for offset, pairs in enumerate(bad.values()):
        for i, (s, t) in enumerate(pairs):
            where = 17 + 97 * i + 31 * offset  # spread over several chunks
            src.insert(where, s)
            tgt.insert(where, t)
    return src, tgt, {reason: len(pairs) for reason, pairs in bad.items()}


def test_preprocess_counts_the_injected_pairs_and_never_filters_valid(
    tmp_path: Path, multi30k_spm: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(preprocess_module, "CHUNK_PAIRS", 64)
    src, tgt, injected = corpus_with_bad_pairs()
    train = write_pair(tmp_path / "train", src, tgt)
    valid = write_pair(tmp_path / "valid", src[:120], tgt[:120])
    outputs = []
    for workers in (1, 2):
        cfg = PreprocessConfig(
            "en",
            "de",
            train=train,
            valid=valid,
            spm_model=str(multi30k_spm),
            workers=workers,
            cleaning=CleaningConfig(filter_langid=True),
        )
        outputs.append(preprocess(cfg, tmp_path / f"out{workers}"))
    one, two = outputs
    assert one["splits"] == two["splits"]
    for path in sorted((tmp_path / "out1").glob("*.bin")) + sorted((tmp_path / "out1").glob("*.idx")):
        assert path.read_bytes() == (tmp_path / "out2" / path.name).read_bytes(), path.name
    split = one["splits"]["train"]
    assert {reason: split["dropped"][reason] for reason in FILTER_REASONS} == injected
    assert sum(split["dropped"].values()) == sum(injected.values()) and split["pairs"] == 300
    assert decoded_split(tmp_path / "out1", "train") == (EN[:300], DE[:300])
    assert one["splits"]["valid"]["pairs"] == 120
    assert decoded_split(tmp_path / "out1", "valid") == ([s.strip() for s in src[:120]], [t.strip() for t in tgt[:120]])


def test_filters_off_keep_every_pair(tmp_path: Path, multi30k_spm: Path) -> None:
    src, tgt, _ = corpus_with_bad_pairs()
    train = write_pair(tmp_path / "train", src, tgt)
    cfg = PreprocessConfig(
        "en",
        "de",
        train=train,
        spm_model=str(multi30k_spm),
        cleaning=CleaningConfig(filter_same=False, filter_scripts=False, filter_langid=False),
    )
    split = preprocess(cfg, tmp_path / "out")["splits"]["train"]
    assert split["pairs"] == len(src) and not any(split["dropped"].values())


def test_each_corpus_counts_its_own_filter_drops(tmp_path: Path, multi30k_spm: Path) -> None:
    """Two corpora of the same bad pairs: one with the three filters on, one with language identification and the
    script filter turned off in its own table. Each corpus's manifest entry counts what its own filters dropped."""
    src, tgt, injected = corpus_with_bad_pairs()
    train = write_pair(tmp_path / "train", src, tgt)
    valid = write_pair(tmp_path / "valid", src[:40], tgt[:40])
    corpora = [
        {"name": "strict", "train": str(train), "filter_langid": True},
        {"name": "loose", "train": str(train), "filter_scripts": False},
    ]
    manifest = preprocess(
        PreprocessConfig("en", "de", valid=valid, spm_model=str(multi30k_spm), corpora=corpora), tmp_path / "out"
    )
    strict, loose = manifest["corpora"]["strict"], manifest["corpora"]["loose"]
    assert {reason: strict["dropped"][reason] for reason in FILTER_REASONS} == injected
    assert strict["pairs"] == 300 and decoded_split(tmp_path / "out", "train.strict") == (EN[:300], DE[:300])
    # Only same_text is on for "loose": the script and language pairs stay.
    assert loose["dropped"]["same_text"] == injected["same_text"]
    assert loose["dropped"]["unexpected_script"] == loose["dropped"]["wrong_language"] == 0
    assert loose["pairs"] == len(src) - injected["same_text"]
