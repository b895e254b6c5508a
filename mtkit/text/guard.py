"""The check that nothing is lost: a source sentence with words never ends with an empty translation or a runaway
one (far longer than its source, or a loop of repeats), and a long sentence whose translation came out far shorter
is worth a second try in two pieces, taken only where the pieces say more and the model is as sure of them. Pure
functions of texts, token counts and log-probabilities."""

from __future__ import annotations

from dataclasses import dataclass

from mtkit.errors import check


@dataclass(frozen=True)
class Guard:
    """A translation of more than `ratio` x its source's tokens + `slack` tokens is a runaway, and so is one that
    repeats a phrase of up to `max_phrase` words `max_repeats` times or more in a row (no sentence a person writes
    does, and a model that loops does). The default ratio is far above any language pair's (German runs 1.1-1.2x
    English in sentencepiece tokens) and below the 3-5x of a loop that runs to the length limit."""

    ratio: float = 3.0
    slack: int = 10
    max_repeats: int = 4
    max_phrase: int = 4
    # A translation of fewer than `short` x its source's tokens, from a source of `short_from` tokens or more, is
    # "short": most often two sentences the splitter could not part (no full stop between them) that the model
    # fused, dropping one. 0 turns the check off. Chosen on Multi30k's val paragraphs (BENCHMARKS.md).
    short: float = 0.7
    short_from: int = 12

    def __post_init__(self) -> None:
        check(self.ratio > 0 and self.slack >= 0, f"guard ratio and slack must be positive; got {self}")
        check(self.max_repeats >= 2 and self.max_phrase >= 1, f"guard repeats and phrase must be >= 2, >= 1: {self}")
        check(0 <= self.short < 1 and self.short_from >= 1, f"guard short must be in [0, 1), short_from >= 1: {self}")

    def better_halves(self, whole: tuple[float, int], halves: list[tuple[float, int]]) -> bool:
        """Whether a short translation's sentence is better translated as its halves (each a log-probability, eos
        included, and a token count, eos excluded): they must say more (more tokens) and the model must be at least
        as sure of them, by the mean log-prob per token the search ranks by. A cut that is no sentence boundary
        leaves fragments the model translates less surely (a name cut in two, "A Boston | Terrier is running",
        came back "Ein Mann. Ein Mädchen auf einem Büe auf einem Büe."), so more tokens alone cannot take it."""
        logprob, tokens = whole
        more = bool(halves) and sum(t for _, t in halves) > tokens
        return more and sum(lp for lp, _ in halves) / sum(t + 1 for _, t in halves) >= logprob / (tokens + 1)

    def limit(self, source_tokens: int) -> int:
        return int(self.ratio * source_tokens) + self.slack

    def verdict(self, translation: str, source_tokens: int, target_tokens: int) -> str:
        """ "" when the translation is fine, else "empty", "runaway" or "short"."""
        if not translation.strip():
            return "empty"
        if target_tokens > self.limit(source_tokens) or self.loop(translation.split()) is not None:
            return "runaway"
        if source_tokens >= self.short_from and target_tokens < self.short * source_tokens:
            return "short"
        return ""

    def loop(self, words: list[str]) -> tuple[int, int] | None:
        """(start, phrase length) of the first phrase repeated max_repeats times in a row; None without one."""
        for size in range(1, self.max_phrase + 1):
            for start in range(len(words) - size * self.max_repeats + 1):
                phrase = words[start : start + size]
                if all(words[start + k * size : start + (k + 1) * size] == phrase for k in range(1, self.max_repeats)):
                    return start, size
        return None

    def unlooped(self, translation: str) -> str | None:
        """The translation with each loop cut to one occurrence of its phrase, words joined by single spaces; None
        when it has no loop."""
        words = translation.split()
        if self.loop(words) is None:
            return None
        while (found := self.loop(words)) is not None:
            start, size = found
            end = start + size
            while words[end : end + size] == words[start : start + size]:
                end += size
            words = words[: start + size] + words[end:]
        return " ".join(words)

    def tame(self, translation: str, source_words: int) -> str:
        """A runaway's last resort: its loops cut (unlooped), then at most ratio x the source's words + slack words
        kept."""
        words = (self.unlooped(translation) or translation).split()
        return " ".join(words[: self.limit(source_words)])
