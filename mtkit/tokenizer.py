"""Joint sentencepiece BPE: train on a bounded sample of both sides, load, encode/decode; and the table
tokenizer of models trained elsewhere (separate source and target sentencepiece models, ids from a table).

Identity normalization with whitespace kept and byte fallback make decode(encode(x)) == x for every
string except those containing U+2581 "▁" (sentencepiece's space marker), which decodes as a space.
No input maps to <unk>: characters outside the vocabulary become UTF-8 byte pieces. (All of this holds for
the models mtkit trains; a model trained elsewhere keeps its own normalization and fallback.)
"""

from __future__ import annotations

import base64
import functools
import json
from pathlib import Path

import sentencepiece as spm

from mtkit.errors import UserError, check

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
# Pieces written (mtkit.exports.ctranslate2) for the specials a model trained elsewhere lacks; sentencepiece's
# own names.
SPECIAL_PIECES = ("<pad>", "<unk>", "<s>", "</s>")
TABLE_MAGIC = b"mtkit-table-tokenizer 1\n"  # the first line of a TableTokenizer's bytes
MAX_CACHED_WORDS = 500_000  # about 100 MB of word -> ids entries before the cache starts over
# Texts on which the word cache must agree with sentencepiece, else the model splits words differently.
# The last two are spaces only after NFKC (models trained elsewhere normalize so).
_CACHE_PROBES = ["a", "ab cd", "  a  b  ", " x", "x ", "a\tb c", "x\u2581y z", "a\u00a0b c", "x\u3000 y"]


def language_ids(pieces: list[str]) -> dict[str, int]:
    """Code -> id of every piece `>>code<<` (opus-mt's target-language codes; MarianTokenizer's test), by code."""
    found = {
        piece[2:-2]: i
        for i, piece in enumerate(pieces)
        if len(piece) > 4 and piece.startswith(">>") and piece.endswith("<<")
    }
    return dict(sorted(found.items()))


def find_code(ids: dict[str, int], code: str) -> int | None:
    """`code`'s id in `ids`; a request's lower-cased code still finds opus-mt's mixed-case ones (>>zho_Hans<<)."""
    if code in ids:
        return ids[code]
    matches = [i for known, i in ids.items() if known.lower() == code.lower()]
    return matches[0] if len(matches) == 1 else None


def _language_codes(tokenizer: Tokenizer | TableTokenizer) -> list[str]:
    """The target languages of a multilingual model: the codes xx of its source pieces `>>xx<<`, sorted; [] for
    others. Both tokenizers' `language_codes`."""
    return list(tokenizer._language_ids)


def _language_id(tokenizer: Tokenizer | TableTokenizer, code: str) -> int | None:
    """The source id of the piece `>>code<<` (any case of `code` when only one piece matches), or None. Both
    tokenizers' `language_id`."""
    return find_code(tokenizer._language_ids, code)


def _code_ids(tokenizer: Tokenizer | TableTokenizer) -> dict[str, int]:
    """Code -> source id of the model's pieces `>>code<<`: both tokenizers' `_language_ids`, cached per tokenizer."""
    return language_ids(tokenizer.pieces())


class Tokenizer:
    """A loaded sentencepiece model seen through mtkit's special ids (pad 0, unk 1, bos 2, eos 3).

    A model trained elsewhere with other special ids (sentencepiece's defaults: unk 0, bos 1, eos 2, no pad) is
    remapped here, so that the rest of mtkit keeps its fixed ids: ids 0-3 are the model's own pad/unk/bos/eos
    and new ids for those it lacks, its other pieces follow in their order. The vocabulary grows by the specials
    it lacks (sentencepiece's defaults: by 1, the pad). The models mtkit trains map to themselves.
    """

    def __init__(self, processor: spm.SentencePieceProcessor, name: str = "<bytes>") -> None:
        self._processor = processor
        specials = (processor.pad_id(), processor.unk_id(), processor.bos_id(), processor.eos_id())
        self._to_spm, self._to_mtkit = special_id_maps(specials, processor.get_piece_size())
        self._word_ids: dict[str, list[int]] = {}
        space = self._spm_encode([" "])[0]  # " " is two lone-space words, each encoded the same way
        self._space_ids = space[: len(space) // 2]
        self._cache_exact = self._encode_cached(_CACHE_PROBES) == self._spm_encode(_CACHE_PROBES)

    @classmethod
    def load(cls, path: str | Path) -> Tokenizer:
        """Load a .model file; a missing or corrupt file is a UserError naming it."""
        path = Path(path)
        check(path.is_file(), f"{path}: no such sentencepiece model")
        return cls.from_bytes(path.read_bytes(), name=str(path))

    @classmethod
    def from_bytes(cls, data: bytes, name: str = "<bytes>") -> Tokenizer:
        """Rebuild from a serialized model proto (checkpoints embed one)."""
        try:
            processor = spm.SentencePieceProcessor(model_proto=data)
        except RuntimeError:
            raise UserError(f"{name}: not a valid sentencepiece model") from None
        return cls(processor, name)

    def to_bytes(self) -> bytes:
        """The serialized model proto."""
        return self._processor.serialized_model_proto()

    @property
    def vocab_size(self) -> int:
        return len(self._to_spm) if self._to_spm is not None else self._processor.get_piece_size()

    def pieces(self) -> list[str]:
        """Every piece in mtkit's id order: the vocabulary another engine needs (mtkit.exports.ctranslate2).

        A special the model lacks gets sentencepiece's name for it, or a name no piece has: engines that look
        pieces up by name need each once.
        """
        own = [self._processor.id_to_piece(i) for i in range(self._processor.get_piece_size())]
        if self._to_spm is None:
            return own
        taken = set(own)
        return [
            own[i] if i >= 0 else _unused_name(SPECIAL_PIECES[mtkit_id], taken)
            for mtkit_id, i in enumerate(self._to_spm)
        ]

    # mtkit's fixed ids, whatever the model's own (remapped in __init__); a TableTokenizer reads its from its tables.
    pad_id, unk_id, bos_id, eos_id = PAD_ID, UNK_ID, BOS_ID, EOS_ID

    def encode(self, texts: list[str]) -> list[list[int]]:
        """Piece ids of each text, without bos/eos: exactly sentencepiece's, 2-3x faster.

        BPE pieces never cross a space, so a text's ids are its space-separated words' ids in a row;
        a bounded word cache saves re-encoding frequent words (measured 2x on Multi30k from cold).
        """
        if not self._cache_exact:
            return self._spm_encode(texts)
        return self._encode_cached(texts)

    def _spm_encode(self, texts: list[str]) -> list[list[int]]:
        """sentencepiece's ids, in mtkit's numbering."""
        encoded = self._processor.encode(texts, out_type=int)
        if self._to_mtkit is None:
            return encoded
        to_mtkit = self._to_mtkit
        return [[to_mtkit[i] for i in ids] for ids in encoded]

    def _encode_cached(self, texts: list[str]) -> list[list[int]]:
        if len(self._word_ids) > MAX_CACHED_WORDS:
            self._word_ids.clear()  # keeps memory bounded; frequent words come back at once
        cache = self._word_ids
        encoded = []
        for text in texts:
            ids: list[int] = []
            if text:
                for word in text.split(" "):
                    word_ids = cache.get(word)
                    if word_ids is None:
                        word_ids = cache[word] = self._encode_word(word)
                    ids += word_ids
            encoded.append(ids)
        return encoded

    def _encode_word(self, word: str) -> list[int]:
        # An empty word lies between two spaces: sentencepiece gives it a lone space piece.
        if not word:
            return self._space_ids
        # One string, not a list of one: sentencepiece hands a list to its thread pool, which cost 28x on the
        # 1,000 test sentences (0.16 s against 5.8 ms, 5% of translating them).
        ids = self._processor.encode(word)
        return ids if self._to_mtkit is None else [self._to_mtkit[i] for i in ids]

    @property
    def target_vocab_size(self) -> int:
        return self.vocab_size

    def encode_target(self, texts: list[str]) -> list[list[int]]:
        """Target-side ids: one joint model encodes both sides."""
        return self.encode(texts)

    def target_pieces(self) -> list[str]:
        return self.pieces()

    # The language codes both tokenizers read alike from their (source) pieces, written once above the classes.
    language_codes = _language_codes
    language_id = _language_id
    _language_ids = functools.cached_property(_code_ids)

    def decode(self, ids: list[list[int]]) -> list[str]:
        """Texts of id sequences; pad/bos/eos decode to nothing (control pieces, or absent from the model)."""
        if self._to_spm is None:
            return self._processor.decode([list(map(int, seq)) for seq in ids])
        to_spm = self._to_spm
        return self._processor.decode([[j for j in (to_spm[int(i)] for i in seq) if j >= 0] for seq in ids])


def load_tokenizer(path: str | Path) -> Tokenizer | TableTokenizer:
    """A tokenizer file: a sentencepiece model, or a table tokenizer's bundle (TableTokenizer.to_bytes)."""
    path = Path(path)
    check(path.is_file(), f"{path}: no such tokenizer model")
    return tokenizer_from_bytes(path.read_bytes(), name=str(path))


def tokenizer_from_bytes(data: bytes, name: str = "<bytes>") -> Tokenizer | TableTokenizer:
    """What a checkpoint's `spm_model` or a data directory's spm.model holds, loaded as the right tokenizer."""
    if data.startswith(TABLE_MAGIC):
        return TableTokenizer.from_bytes(data, name)
    return Tokenizer.from_bytes(data, name)


class TableTokenizer:
    """Separate source and target sentencepiece models whose pieces are looked up in id tables (piece -> id), as
    Marian's models (Hugging Face `MarianTokenizer`: source.spm, target.spm, vocab.json) tokenize.

    Ids are the tables' own, not sentencepiece's; a piece missing from a table is unk. Special pieces are
    Marian's names: </s> (eos), <unk>, <pad>, and <s> (bos) where the table has one, else bos is the pad (such a
    model starts decoding from a configured id and never emits either). A source text may begin with a target
    language code such as >>de<< (multilingual models), which is its own piece. Serialized as one blob so that a
    checkpoint and a data directory carry it where they carry a sentencepiece model (`spm_model`, spm.model).
    """

    def __init__(
        self,
        source: bytes,
        target: bytes,
        source_vocab: list[str],
        target_vocab: list[str] | None = None,
        name: str = "<bytes>",
    ) -> None:
        self._models = (source, target)
        self._source, self._target = _load_processor(source, name), _load_processor(target, name)
        self.source_vocab, self.target_vocab = list(source_vocab), list(target_vocab or source_vocab)
        self._source_ids = {piece: i for i, piece in enumerate(self.source_vocab)}
        self._target_ids = {piece: i for i, piece in enumerate(self.target_vocab)}
        for piece in ("</s>", "<unk>", "<pad>"):
            same = self._source_ids.get(piece) == self._target_ids.get(piece)
            check(piece in self._source_ids and same, f"{name}: {piece} must have one id in both vocabularies")
        self.eos_id, self.unk_id, self.pad_id = (self._source_ids[p] for p in ("</s>", "<unk>", "<pad>"))
        self.bos_id = self._source_ids.get("<s>", self.pad_id)
        self._skipped = {self.pad_id, self.bos_id, self.eos_id}
        self._codes = {piece for piece in self.source_vocab if piece.startswith(">>") and piece.endswith("<<")}

    @classmethod
    def from_bytes(cls, data: bytes, name: str = "<bytes>") -> TableTokenizer:
        try:
            fields = json.loads(data[len(TABLE_MAGIC) :].decode("utf-8"))
            source, target = (base64.b64decode(fields[key]) for key in ("source_spm", "target_spm"))
            return cls(source, target, fields["source_vocab"], fields["target_vocab"], name)
        except (ValueError, KeyError, TypeError):
            raise UserError(f"{name}: not a valid mtkit table tokenizer") from None

    def to_bytes(self) -> bytes:
        """The bundle: a magic line, then JSON (sorted keys, so equal tokenizers give equal bytes and hashes)."""
        source, target = (base64.b64encode(model).decode("ascii") for model in self._models)
        target_vocab = None if self.target_vocab == self.source_vocab else self.target_vocab
        fields = {
            "source_spm": source,
            "target_spm": target,
            "source_vocab": self.source_vocab,
            "target_vocab": target_vocab,
        }
        return TABLE_MAGIC + json.dumps(fields, sort_keys=True, ensure_ascii=False).encode("utf-8")

    @property
    def models(self) -> tuple[bytes, bytes]:
        """The source and target sentencepiece model protos."""
        return self._models

    @property
    def vocab_size(self) -> int:
        return len(self.source_vocab)

    @property
    def target_vocab_size(self) -> int:
        return len(self.target_vocab)

    def pieces(self) -> list[str]:
        return self.source_vocab

    def target_pieces(self) -> list[str]:
        return self.target_vocab

    # The language codes both tokenizers read alike from their (source) pieces, written once above the classes.
    language_codes = _language_codes
    language_id = _language_id
    _language_ids = functools.cached_property(_code_ids)

    def encode(self, texts: list[str]) -> list[list[int]]:
        """Source ids of each text, without eos."""
        return [self._encode_source(text) for text in texts]

    def _encode_source(self, text: str) -> list[int]:
        code: list[int] = []
        end = text.find("<<") if text.startswith(">>") else -1
        if end != -1 and text[: end + 2] in self._codes:
            code, text = [self._source_ids[text[: end + 2]]], text[end + 2 :]
        return code + self._lookup(self._source.encode(text, out_type=str), self._source_ids)

    def encode_target(self, texts: list[str]) -> list[list[int]]:
        """Target ids of each text, without eos (for training data)."""
        return [self._lookup(pieces, self._target_ids) for pieces in self._target.encode(texts, out_type=str)]

    def _lookup(self, pieces: list[str], table: dict[str, int]) -> list[int]:
        unk = self.unk_id
        return [table.get(piece, unk) for piece in pieces]

    def decode(self, ids: list[list[int]]) -> list[str]:
        """Texts of target id sequences; pad, bos and eos decode to nothing."""
        vocab, skipped = self.target_vocab, self._skipped
        return [self._target.decode_pieces([vocab[int(i)] for i in seq if int(i) not in skipped]) for seq in ids]


def _load_processor(model: bytes, name: str) -> spm.SentencePieceProcessor:
    try:
        return spm.SentencePieceProcessor(model_proto=model)
    except RuntimeError:
        raise UserError(f"{name}: not a valid sentencepiece model") from None


def special_id_maps(specials: tuple[int, int, int, int], size: int) -> tuple[list[int] | None, list[int] | None]:
    """(mtkit id -> model id, -1 where the model lacks that special; model id -> mtkit id) for a model of
    `size` pieces whose pad/unk/bos/eos ids are `specials` (-1: none). (None, None) when they are mtkit's."""
    if specials == (PAD_ID, UNK_ID, BOS_ID, EOS_ID):
        return None, None
    to_spm = list(specials) + [i for i in range(size) if i not in specials]
    to_mtkit = [0] * size
    for mtkit_id, spm_id in enumerate(to_spm):
        if spm_id >= 0:
            to_mtkit[spm_id] = mtkit_id
    return to_spm, to_mtkit


def _unused_name(name: str, taken: set[str]) -> str:
    """`name`, or `<name_1>`, `<name_2>`, ... if a piece of the model already has it."""
    candidate, n = name, 0
    while candidate in taken:
        n += 1
        candidate = f"<{name.strip('<>')}_{n}>"
    return candidate
