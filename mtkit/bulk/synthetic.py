"""A model run over a text file into a synthetic parallel corpus: PREFIX.Y (the translations) beside PREFIX.X (the
lines as they were). Back-translation (Sennrich et al. 2016, `mtkit back-translate`): monolingual text translated by
a reverse model, sampled by default (Edunov et al. 2018), a Y->X training corpus. Sequence-level distillation (Kim
and Rush 2016, `mtkit distill`): training sources translated by a teacher, one model or an ensemble, with beam
search, an X->Y corpus for a student. With a glossary or patterns to protect, each line goes as `mtkit translate
--no-guard --no-case` sends it (mtkit.text.line_plan). Resumable and exact after a kill: chunks are
recorded whole (mtkit.bulk.resumable) and a chunk's random draws depend only on the seed and its index. Torch-free:
the engine factory loads either engine.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from mtkit.bulk.resumable import ResumableOutputs
from mtkit.bulk.shard_sets import Shard
from mtkit.bulk.shards import ShardSpec, chunked, read_line_range
from mtkit.console import log, warn
from mtkit.engines.config import EngineConfig
from mtkit.engines.contract import Translating, language_pair
from mtkit.engines.factory import load_translator
from mtkit.engines.options import TranslateOptions
from mtkit.engines.output import best_lines
from mtkit.engines.plans import split_options
from mtkit.engines.streaming import translate_lines
from mtkit.errors import check
from mtkit.faults import BACKTRANSLATE_PAUSE_MS, armed
from mtkit.files import DirectoryLock, count_lines, file_identity
from mtkit.search.config import SearchOverrides, TranslateConfig
from mtkit.text.glossary import Glossary
from mtkit.text.protect import ProtectConfig
from mtkit.text.sentence_plan import SplitOptions, term_counts

# The TranslateConfig fields only sampling reads: any of them off its default asks for sampling.
SAMPLING_FIELDS = ("sampling", "top_k", "top_p", "temperature")


@dataclass
class SyntheticCorpusConfig:
    """What `mtkit back-translate` or `mtkit distill` was asked (their options' defaults are the CLI's): the job's own
    settings, the engine that runs the model (an ensemble included), and `search`, TranslateConfig fields set over
    the run's recipe. A beam searches with that beam; without one (None) the job samples, or searches with the
    recipe's beam when `beam_by_default`."""

    run: Path  # the model: translates the input's language (a reverse model, or a distillation's teacher)
    input: Path
    out: Path  # PREFIX
    chunk_lines: int  # lines translated and recorded together: a kill loses at most one chunk's work
    engine: EngineConfig = field(default_factory=EngineConfig)
    # beam and length_penalty (None: the recipe's); sampling, top_k, top_p, temperature and seed (None:
    # TranslateConfig's defaults); target_lang (None: none, whatever the recipe says); the other fields unread
    search: SearchOverrides = field(default_factory=SearchOverrides)
    on_bad_utf8: str = "error"  # or "replace": such bytes become U+FFFD on both sides
    overwrite: bool = False
    beam_by_default: bool = False  # no --beam: the run's recipe's beam (distillation), not sampling
    shard: ShardSpec | None = None  # this process's share of the input (mtkit.bulk.shards); None: all of it
    # Terms and protected text (docs/terminology.md), used only with a glossary or a pattern of `protect`: without
    # either, the lines go to the model as they are, as before these options were.
    glossary: Glossary | None = None  # terms each translation takes, read from glossary_file (the resume identity's)
    glossary_file: Path | None = None
    protect: ProtectConfig = field(default_factory=ProtectConfig)  # kept as written: the defaults and any patterns
    term_method: str = ""  # how the glossary is applied (mtkit.text.glossary.TERM_METHODS); "": the model's default

    def __post_init__(self) -> None:
        beam = self.search.beam
        asks_sampling = any(self.given(name) != getattr(TranslateConfig, name) for name in SAMPLING_FIELDS)
        check(
            beam is None or not asks_sampling,
            "--beam N is beam search; --sampling, --top-k, --top-p and --temperature sample: give one or the other",
        )
        check(beam is None or beam >= 1, f"--beam {beam}: at least 1")
        check(
            self.search.length_penalty is None or not self.sampled,
            "--length-penalty ranks beam search's hypotheses; give it with --beam, not when sampling",
        )
        check(self.chunk_lines >= 1, f"--chunk-lines {self.chunk_lines}: at least 1")

    @property
    def takes_terms(self) -> bool:
        """Whether the lines go through the line path (mtkit.text.line_plan; a glossary or a pattern asked)."""
        return self.glossary is not None or bool(self.protect.patterns)

    @property
    def sampled(self) -> bool:
        return self.search.beam is None and not self.beam_by_default

    @property
    def seed(self) -> int:
        """The seed each chunk's own is made from (chunk_seed)."""
        return self.given("seed")

    def given(self, name: str) -> Any:
        """The search field `name` as asked, else TranslateConfig's default."""
        value = getattr(self.search, name)
        return getattr(TranslateConfig, name) if value is None else value

    def overrides(self, index: int) -> SearchOverrides:
        """The search of chunk `index`: one output per line, by beam (--beam's or the recipe's) or by unrestricted
        (or top-k/top-p) sampling, seeded for the chunk (chunk_seed); target_lang as given, None included.
        CTranslate2 samples on one worker: which of several threads takes a batch would change its draws."""
        asked = self.search
        common = {"nbest": 1, "seed": chunk_seed(self.seed, index), "target_lang": asked.target_lang}
        reset = () if asked.target_lang is not None else ("target_lang",)
        if self.sampled:
            drawn = {name: self.given(name) for name in ("top_k", "top_p", "temperature")}
            workers = 1 if self.engine.engine == "ctranslate2" else None
            return SearchOverrides(sampling=True, beam=1, workers=workers, **drawn, **common, reset=reset)
        beam = {"beam": asked.beam, "length_penalty": asked.length_penalty}
        return SearchOverrides(sampling=False, **beam, **common, reset=reset)


def chunk_seed(seed: int, index: int) -> int:
    """The sampling seed of chunk `index`: a hash of both (2**32 values, CTranslate2's seed type), so neighbouring
    seeds and chunks draw unrelated streams."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{index}".encode()).digest()[:4], "little")


def load_job_translator(cfg: SyntheticCorpusConfig, index: int) -> Translating:
    """The reverse model with the search of `cfg`, seeded for chunk `index`; the CTranslate2 search asked for only
    on that engine (bulk jobs default to native, which the torch engine does not run)."""
    engine = cfg.engine
    if engine.engine != "ctranslate2":
        engine = replace(engine, ct2_search="exact")
    return load_translator(cfg.run, engine, cfg.overrides(index))


def reseeded(translator: Translating, cfg: SyntheticCorpusConfig, index: int) -> Translating:
    """The torch engine seeds each batch's generator from cfg.seed: the same model, seeded for chunk `index`."""
    return replace(translator, cfg=replace(translator.cfg, seed=chunk_seed(cfg.seed, index)))  # type: ignore[type-var]


def opens_per_chunk(cfg: SyntheticCorpusConfig) -> bool:
    """CTranslate2 (4.8) seeds a worker thread's generator at that thread's first draw only, and set_random_seed
    does not restart it: a model opened afresh (new threads) per chunk draws from the chunk's seed whatever ran
    before, so a resumed run draws what an uninterrupted one drew."""
    return cfg.engine.engine == "ctranslate2" and cfg.sampled


def line_options(cfg: SyntheticCorpusConfig, translator: Translating) -> SplitOptions | None:
    """How each line is sent with cfg's glossary and patterns: as `mtkit translate --no-guard --no-case` sends it
    (one segment a line, spans and terms as its term method puts them, a line missing a term sent again by the
    method's next way); None without a glossary or a pattern (the lines as they are)."""
    if not cfg.takes_terms:
        return None
    options = TranslateOptions(glossary=cfg.glossary, protect=cfg.protect, term_method=cfg.term_method, case=False)
    return split_options(translator, split=False, options=options)


def translated_lines(
    translator: Translating, lines: list[str], first_lineno: int, options: SplitOptions | None, terms: list[dict]
) -> list[str]:
    """Each line's best translation as one output line; with `options`, by mtkit translate's line path, each line's
    glossary terms (source, target, applied) added to `terms`."""
    if options is None:
        return best_lines(translator.tokenizer, translator.translate_hypotheses(lines, first_lineno=first_lineno))
    out, _ = translate_lines(
        translator,
        lines,
        first_lineno - 1,
        with_scores=False,
        strict=False,
        prefixes=None,
        prefix_name="",
        plain=options,
        terms=terms,
    )
    return out


def text_identity(cfg: SyntheticCorpusConfig, options: SplitOptions | None) -> dict[str, str]:
    """The glossary (its file's path, size and modification time), the patterns and the term method: only with
    them, so that a run begun without any still resumes."""
    if options is None:
        return {}
    return {
        "glossary": file_identity(cfg.glossary_file) if cfg.glossary_file is not None else "",
        "protect": ";".join(cfg.protect.patterns),
        "protect_default": str(cfg.protect.default),
        "term_method": options.term_method,
    }


def identity(cfg: SyntheticCorpusConfig, translator: Translating) -> dict[str, str]:
    """What a resumed run must share with the one it continues for the same bytes: model, input, engine, where and
    on how many threads it runs, search, and the glossary and patterns (each named in the refusal)."""
    checkpoint = Path(str(translator.info.get("checkpoint")))
    search = {**asdict(translator.cfg), "seed": cfg.seed}
    search.pop("workers")  # a sentence's output does not depend on it (CTranslate2 samples on one worker)
    return {
        "model": file_identity(checkpoint) if checkpoint.is_file() else str(checkpoint),
        "input": file_identity(cfg.input),
        "on_bad_utf8": cfg.on_bad_utf8,
        "chunk_lines": str(cfg.chunk_lines),
        "engine": cfg.engine.engine,
        "ct2_search": cfg.engine.ct2_search if cfg.engine.engine == "ctranslate2" else "",
        # only with an ensemble: a progress file written before ensembles existed still resumes
        **(
            {
                "ensemble": ";".join(
                    file_identity(p) if p.is_file() else str(p.resolve()) for p in cfg.engine.ensemble
                ),
                "ensemble_mode": cfg.engine.ensemble_mode,
            }
            if cfg.engine.ensemble
            else {}
        ),
        "device": str(translator.device),
        "dtype": str(translator.describe()["dtype"]),
        "threads": str(translator.info.get("threads", "")),  # a sampled token can depend on a GEMM's rounding
        **{name: str(value) for name, value in search.items()},
        **text_identity(cfg, line_options(cfg, translator)),
    }


def read_file_chunks(
    path: Path, size: int, on_bad_utf8: str = "error", start: int = 0, end: int | None = None
) -> Iterator[list[str]]:
    """Lists of `size` lines of the input's lines [start, end) (the last may be shorter); invalid UTF-8 is an error
    naming its line, unless replaced."""
    return chunked(read_line_range(path, start, end, on_bad_utf8), size)


def output_paths(prefix: Path, translator: Translating) -> tuple[Path, Path]:
    """(PREFIX.Y, PREFIX.X): the translations, in the model's target language (--target-lang's for a multilingual
    model), and the copied text in its source."""
    langs = language_pair(translator)
    check(
        langs is not None,
        f"{translator.info.get('checkpoint')}: its data manifest names no languages, so the outputs cannot be named",
    )
    source, target = langs  # type: ignore[misc]
    target = translator.cfg.target_lang or target  # a multilingual model's: the one asked for
    return Path(f"{prefix}.{target}"), Path(f"{prefix}.{source}")


def write_synthetic_corpus(cfg: SyntheticCorpusConfig, on_chunk: Callable[[int], None] | None = None) -> dict:
    """Translate cfg.input into PREFIX.Y beside PREFIX.X, going on from an unfinished run's last recorded chunk;
    returns the summary `mtkit back-translate` and `mtkit distill` print. `on_chunk(lines)` after each chunk (resumed
    past ones too). With cfg.shard, that shard's lines into its own files, and the set merged by the shard that
    completes it."""
    check(cfg.input.is_file(), f"{cfg.input}: no such file")
    cfg.out.parent.mkdir(parents=True, exist_ok=True)
    label = f".{cfg.shard.label}" if cfg.shard else ""  # the shards of one PREFIX run side by side
    lock = DirectoryLock(
        cfg.out.parent, warn, name=f".{cfg.out.name}{label}.lock", subject=f"{cfg.out}{label}: back-translation"
    )
    with lock:  # before the model loads: a second run on PREFIX is refused at once and touches nothing
        total = count_lines(cfg.input) if cfg.shard else 0
        start, end = cfg.shard.line_range(total, cfg.chunk_lines) if cfg.shard else (0, None)
        translator = load_job_translator(cfg, start // cfg.chunk_lines)
        paths = finals = output_paths(cfg.out, translator)
        state, ident = Path(f"{cfg.out}.progress.json"), identity(cfg, translator)
        shard = (
            Shard(cfg.out, cfg.shard, list(paths), "synthetic", ident, total, cfg.chunk_lines) if cfg.shard else None
        )
        finished = shard is not None and not cfg.overwrite and shard.already_done()  # a requeued shard: nothing to do
        if shard is not None:
            paths, state, ident = (*shard.files,), shard.progress, shard.resume_identity()
        for path in dict.fromkeys([*paths, *finals]):  # a finished run's outputs are replaced only when asked
            check(
                finished or cfg.overwrite or state.exists() or not path.exists(),
                f"{path} exists and no {state.name} says how far it got; --overwrite to write it again",
            )
        if shard is not None and not finished:
            shard.begin()
        outputs = None if finished else ResumableOutputs(state, list(paths), ident, cfg.overwrite)
        resumed, read, empty = end - start if outputs is None else outputs.done, 0, 0  # type: ignore[operator]
        options, terms = line_options(cfg, translator), []  # the glossary's terms of the lines translated here
        # A test's pause after each recorded chunk, so that it can stop a run, or race it, between chunks.
        pause_s = (armed(BACKTRANSLATE_PAUSE_MS) or 0) / 1000
        unused_for: int | None = start // cfg.chunk_lines  # the chunk whose seed `translator` holds before any draw
        if resumed and not finished:
            log(f"{state}: going on after line {start + resumed}")
        chunks = read_file_chunks(cfg.input, cfg.chunk_lines, cfg.on_bad_utf8, start, end)
        for index, lines in enumerate(chunks, start=start // cfg.chunk_lines):  # the whole input's chunk numbers
            read += len(lines)
            empty += sum(not line.strip() for line in lines)  # encode_sources strips: these translate to ""
            if read > resumed:  # chunks are recorded whole, so this one was not
                if opens_per_chunk(cfg) and unused_for != index:
                    translator = None  # type: ignore[assignment]  # freed before the next one loads
                    translator = load_job_translator(cfg, index)
                elif cfg.sampled:
                    translator = reseeded(translator, cfg, index)
                unused_for = None
                synthetic = translated_lines(translator, lines, start + read - len(lines) + 1, options, terms)
                outputs.append(  # type: ignore[union-attr]
                    ["".join(f"{text}\n" for text in synthetic), "".join(f"{line}\n" for line in lines)], len(lines)
                )
                time.sleep(pause_s)
            if on_chunk is not None:
                on_chunk(len(lines))
        if shard is not None:
            sharded = shard.finish()  # merges the set when this shard completes it
        else:
            sharded = {}
            outputs.finish()  # type: ignore[union-attr]
    log(f"{state}: removed, the {'shard' if shard else 'corpus'} is complete")
    return {
        "read": read,
        "written": read - resumed,
        "empty": empty,
        "resumed_from": resumed,
        "outputs": [str(path) for path in paths],
        "engine": cfg.engine.engine,
        "search": "sampling" if cfg.sampled else f"beam {translator.cfg.beam}",
        **({} if cfg.sampled else {"length_penalty": translator.cfg.length_penalty}),
        **({"term_method": options.term_method, **term_counts(terms)} if cfg.glossary is not None else {}),
        **sharded,
    }
