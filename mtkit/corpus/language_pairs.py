"""The language pairs a model translates, read from its data's manifest (the corpora preprocess wrote, their "pairs",
its one pair) and, for a multilingual model, its tokenizer's >>xx<< codes. Plain Python, torch-free: the engines, the
server, the bulk jobs and the Hugging Face export's model card ask it alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mtkit.tokenizer import Tokenizer


def language_pairs(tokenizer: Tokenizer, manifest: dict[str, Any]) -> list[tuple[str, str]]:
    """Every (source, target) a model translates, lower-cased: its data's corpora's (else its "pairs", "en-de"), else
    its source language into each code of its vocabulary, else the manifest's one pair; [] when the data names none."""
    corpora = manifest.get("corpora") or {}
    if corpora:  # each corpus's own codes: a code may hold a hyphen (zh-Hans), which a "pairs" string cannot tell
        return sorted({(c["source_lang"].lower(), c["target_lang"].lower()) for c in corpora.values()})
    if manifest.get("pairs"):
        halves = [pair.lower().partition("-") for pair in manifest["pairs"]]
        return sorted({(source, target) for source, _, target in halves})
    source, target = manifest.get("source_lang"), manifest.get("target_lang")
    codes = tokenizer.language_codes()
    if source and codes:
        return [(source.lower(), code.lower()) for code in codes]
    return [(source.lower(), target.lower())] if source and target else []
