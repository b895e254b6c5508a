"""The joint sentencepiece BPE model preprocess trains on a bounded sample of both sides of a corpus, written
atomically; mtkit.tokenizer loads and runs it. Preprocessing's job, so the tokenizer itself stays below every file
helper.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from pathlib import Path

import sentencepiece as spm

from mtkit.errors import UserError, check
from mtkit.files import atomic_write
from mtkit.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID


def train_tokenizer(
    sentences: Iterable[str],
    out_path: Path,
    vocab_size: int,
    character_coverage: float = 1.0,
    input_sentence_size: int = 2_000_000,
    seed: int = 1,
    num_threads: int = 1,
    user_defined_symbols: list[str] | None = None,
) -> Path:
    """Train a joint BPE model on `sentences` (both sides) and write it atomically to `out_path`.

    `sentences` is streamed: sentencepiece keeps a seeded reservoir sample of `input_sentence_size`
    of them, so memory is bounded however large the corpus. The pieces are a function of
    (sentences, options, seed); the file also records `num_threads`, so its hash depends on it.
    `user_defined_symbols` (language tokens such as >>de<<, corpus tags) become one piece each, ids 4, 5, ...
    """
    check(vocab_size > 0, f"vocab size must be positive, got {vocab_size}")
    check(input_sentence_size > 0, f"input sentence size must be positive, got {input_sentence_size}")
    check(0.0 < character_coverage <= 1.0, f"character coverage must be in (0, 1], got {character_coverage}")
    source = _CapturingIterator(sentences)
    model = io.BytesIO()
    spm.set_random_generator_seed(seed)
    # Only when given: a model trained without them stays byte-identical to one trained before this option.
    symbols = {"user_defined_symbols": list(user_defined_symbols)} if user_defined_symbols else {}
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(source),
            model_writer=model,
            model_type="bpe",
            vocab_size=vocab_size,
            character_coverage=character_coverage,
            byte_fallback=True,
            pad_id=PAD_ID,
            unk_id=UNK_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            # Identity + kept whitespace: decoding restores the text exactly (see module docstring).
            normalization_rule_name="identity",
            remove_extra_whitespaces=False,
            input_sentence_size=input_sentence_size,
            shuffle_input_sentence=True,
            num_threads=num_threads,
            minloglevel=2,
            **symbols,
        )
    except RuntimeError as exc:
        if source.error is not None:
            raise source.error from None  # a UserError (bad UTF-8, missing file) from the reader
        reason = str(exc).split("] ")[-1].strip()
        raise UserError(f"sentencepiece training failed: {reason}") from None
    with atomic_write(out_path, "wb") as handle:
        handle.write(model.getvalue())
    return Path(out_path)


class _CapturingIterator:
    """Remembers the exception its source raised: sentencepiece turns it into a bare RuntimeError."""

    def __init__(self, items: Iterable[str]) -> None:
        self._items = items
        self.error: Exception | None = None

    def __iter__(self) -> Iterator[str]:
        try:
            yield from self._items
        except Exception as exc:
            self.error = exc
            raise
