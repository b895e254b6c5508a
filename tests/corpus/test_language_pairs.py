"""mtkit.corpus.language_pairs: the language pairs a model translates, from its data's manifest and its tokenizer's
codes. Real tokenizers, no model."""

from __future__ import annotations

from pathlib import Path

from mtkit.corpus.language_pairs import language_pairs
from mtkit.tokenizer import Tokenizer


def test_language_pairs_from_the_data_else_the_source_into_each_code(en_de_fr_spm: Path, multi30k_spm: Path) -> None:
    codes = Tokenizer.load(en_de_fr_spm)
    assert language_pairs(codes, {"source_lang": "en", "target_lang": "de", "pairs": ["en-de", "EN-FR"]}) == [
        ("en", "de"),
        ("en", "fr"),
    ]
    corpora = {
        "news": {"source_lang": "en", "target_lang": "zh-Hans"},
        "web": {"source_lang": "EN", "target_lang": "de"},
    }
    assert language_pairs(codes, {"pairs": ["en-zh-Hans", "en-de"], "corpora": corpora}) == [
        ("en", "de"),
        ("en", "zh-hans"),
    ]
    assert language_pairs(codes, {"source_lang": "en", "target_lang": "mul"}) == [("en", "de"), ("en", "fr")]
    plain = Tokenizer.load(multi30k_spm)
    assert language_pairs(plain, {"source_lang": "EN", "target_lang": "de"}) == [("en", "de")]
    assert language_pairs(plain, {}) == []
