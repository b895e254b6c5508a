"""BLEU, chrF and TER through sacrebleu, with sacrebleu's signatures; a labelled legacy tokenized BLEU.

Unlike sacrebleu's Python API, a hypothesis/reference line-count mismatch is an error, never a truncation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from mtkit.errors import UserError, check
from mtkit.files import read_lines

_COMPOUND = re.compile(r"(\S)-(\S)")
TOKENIZE = "13a"  # sacrebleu's default tokenizer, the one WMT results are reported with


@dataclass
class ScoreResult:
    bleu: float
    chrf: float
    ter: float
    signature: str
    bleu_detail: str
    chrf_signature: str
    ter_signature: str
    legacy_bleu: float | None = None
    lc_tok_bleu: float | None = None

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def check_aligned(hyps: list[str], refs: list[list[str]], hyp_name: str, ref_names: list[str]) -> None:
    """Every reference stream must have exactly as many lines as the hypotheses."""
    for ref, name in zip(refs, ref_names, strict=True):
        check(
            len(ref) == len(hyps),
            f"{hyp_name} has {len(hyps)} lines but {name} has {len(ref)} lines",
        )


def split_compounds(line: str) -> str:
    """tensor2tensor/fairseq compound splitting: `X-Y` -> `X ##AT##-##AT## Y`."""
    # One non-overlapping pass, exactly as the original perl `s{(\S)-(\S)}{$1 ##AT##-##AT## $2}g`
    # (so "a-b-c" keeps its second hyphen, as in the published numbers).
    return _COMPOUND.sub(r"\1 ##AT##-##AT## \2", line)


def legacy_bleu(hyps: list[str], refs: list[list[str]]) -> float:
    """Paper-style tokenized BLEU: 13a-tokenize, split compounds, then BLEU on the tokens as given.

    The paper used Moses tokenizer.perl + multi-bleu.perl; sacrebleu's 13a tokenizer stands in for
    tokenizer.perl, so this number is close to, not identical with, the paper's scripts.
    """
    from sacrebleu.metrics import BLEU
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    tok = Tokenizer13a()

    def prepare(lines: list[str]) -> list[str]:
        return [split_compounds(tok(line)) for line in lines]

    return BLEU(tokenize="none", force=True).corpus_score(prepare(hyps), [prepare(r) for r in refs]).score


def lc_tok_bleu(hyps: list[str], refs: list[list[str]], lang: str) -> float:
    """The Multi30k literature's BLEU: both sides punctuation-normalised (normalize-punctuation.perl), tokenized
    (tokenizer.perl -l LANG, its default escaping) and lower-cased, as the shared task's `*.lc.norm.tok.*` files
    are made, then BLEU on those tokens (multi-bleu.perl's corpus BLEU). Moses' scripts through sacremoses."""
    try:
        from sacremoses import MosesPunctNormalizer, MosesTokenizer
    except ImportError:
        raise UserError("--lc-tok needs sacremoses: pip install -e '.[moses]'") from None
    from sacrebleu.metrics import BLEU

    normalizer, tokenizer = MosesPunctNormalizer(lang=lang), MosesTokenizer(lang=lang)

    def prepare(lines: list[str]) -> list[str]:
        return [tokenizer.tokenize(normalizer.normalize(line), return_str=True, escape=True).lower() for line in lines]

    return BLEU(tokenize="none", force=True).corpus_score(prepare(hyps), [prepare(r) for r in refs]).score


def score(
    hyps: list[str],
    refs: list[list[str]],
    tokenize: str = TOKENIZE,
    legacy: bool = False,
    lc_tok_lang: str | None = None,
) -> ScoreResult:
    """Corpus BLEU, chrF and TER of `hyps` against one or more reference streams."""
    from sacrebleu.metrics import BLEU, CHRF, TER

    check(len(refs) > 0, "at least one --ref is needed")
    try:
        bleu_metric = BLEU(tokenize=tokenize)
    except Exception as exc:  # sacrebleu raises plain errors for unknown/uninstalled tokenizers
        raise UserError(f"--tokenize {tokenize}: {exc}") from None
    chrf_metric, ter_metric = CHRF(), TER()
    bleu = bleu_metric.corpus_score(hyps, refs)
    chrf = chrf_metric.corpus_score(hyps, refs)
    ter = ter_metric.corpus_score(hyps, refs)
    return ScoreResult(
        bleu=round(bleu.score, 2),
        chrf=round(chrf.score, 2),
        ter=round(ter.score, 2),
        signature=str(bleu_metric.get_signature()),
        bleu_detail=bleu.format(),
        chrf_signature=str(chrf_metric.get_signature()),
        ter_signature=str(ter_metric.get_signature()),
        legacy_bleu=round(legacy_bleu(hyps, refs), 2) if legacy else None,
        lc_tok_bleu=round(lc_tok_bleu(hyps, refs, lc_tok_lang), 2) if lc_tok_lang else None,
    )


def reference_language(path: Path) -> str:
    """The language a reference file's suffix names (test_2016_flickr.de.gz -> de), for --lc-tok."""
    suffixes = [suffix.lstrip(".") for suffix in path.suffixes if suffix != ".gz"]
    check(
        bool(suffixes) and suffixes[-1].isalpha() and len(suffixes[-1]) <= 3,
        f"{path}: its name gives no language code for --lc-tok; name it as --lc-tok-lang LANG",
    )
    return suffixes[-1]


def score_files(
    hyp_lines: list[str],
    hyp_name: str,
    ref_paths: list[Path],
    tokenize: str = TOKENIZE,
    legacy: bool = False,
    lc_tok: bool = False,
    lc_tok_lang: str | None = None,
) -> ScoreResult:
    """Read reference files (plain or .gz, strict UTF-8), check alignment, and score."""
    refs = [list(read_lines(path)) for path in ref_paths]
    check_aligned(hyp_lines, refs, hyp_name, [str(p) for p in ref_paths])
    lang = (lc_tok_lang or reference_language(ref_paths[0])) if lc_tok or lc_tok_lang else None
    return score(hyp_lines, refs, tokenize=tokenize, legacy=legacy, lc_tok_lang=lang)
