"""Stand-in translators the format tests share: upper-casing, and a recorder of what was asked."""

from __future__ import annotations


def upper(texts: list[str]) -> list[str]:
    return [text.upper() for text in texts]


class Recorder:
    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, texts: list[str]) -> list[str]:
        self.asked += texts
        return upper(texts)
