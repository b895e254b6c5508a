"""mtkit <-> Hugging Face Marian: the exported model computes and translates as mtkit's; an opus-mt-shaped model
imported computes and translates as transformers' own, fine-tunes, and exports again. Models are built here."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch

transformers = pytest.importorskip("transformers")
spm = pytest.importorskip("sentencepiece")

from mtkit.engines.torch_engine import TorchTranslator, pad_batch  # noqa: E402
from mtkit.errors import UserError  # noqa: E402
from mtkit.exports.ctranslate2 import export_ctranslate2  # noqa: E402
from mtkit.exports.huggingface import export_huggingface, import_huggingface  # noqa: E402
from mtkit.exports.marian import model_permutation  # noqa: E402
from mtkit.model.layers import sinusoidal_positions  # noqa: E402
from mtkit.model.transformer import ModelConfig  # noqa: E402
from mtkit.recipe import resolve_recipe  # noqa: E402
from mtkit.runs.checkpoint import load_checkpoint, resolve_checkpoint, save_checkpoint  # noqa: E402
from mtkit.runs.checkpoint_files import list_checkpoints  # noqa: E402
from mtkit.runs.model import load_model  # noqa: E402
from mtkit.tokenizer import tokenizer_from_bytes  # noqa: E402
from mtkit.training.config import TrainConfig  # noqa: E402
from mtkit.training.loop import train  # noqa: E402
from tests.conftest import ROOT, preprocess_slice, read_gz_lines, run_mtkit_in_process  # noqa: E402
from tests.reliability.common import (  # noqa: E402
    TRAIN_SETS,
    Trainer,
    differing_tensors,
    kill9,
    mtkit_command,
    newest_step,
)

N_LINES = 40
TRAIN = dataclasses.asdict(TrainConfig())  # the [train] section mtkit import gives an imported run
CAP = 40  # mtkit's max output (max_len_a 0, max_len_b CAP); generate gets room for CAP + start + eos


@pytest.fixture(scope="module")
def lines(multi30k: Path) -> tuple[list[str], list[str]]:
    return (
        read_gz_lines(multi30k / "test_2016_flickr.en.gz", N_LINES),
        read_gz_lines(multi30k / "test_2016_flickr.de.gz", N_LINES),
    )


def test_permutation_maps_mtkit_positions_onto_marians() -> None:
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

    for d in (8, 64, 512):
        marian = MarianSinusoidalPositionalEmbedding(40, d).create_weight()  # a Python loop per value: few rows
        assert torch.equal(sinusoidal_positions(40, d)[:, model_permutation(d)], marian)


def forced_batch(run: Path, src_lines: list[str], tgt_lines: list[str]) -> tuple:
    """mtkit's model of `run` and src [B, S], tgt_in [B, T], tgt_out [B, T] (pad after each target's eos)."""
    model, payload = load_model(resolve_checkpoint(run), torch.device("cpu"), torch.float32, packed=False)
    tokenizer, c = tokenizer_from_bytes(payload["spm_model"]), model.cfg
    src, _ = pad_batch(tokenizer.encode(src_lines), c.pad_id, c.eos_id, torch.device("cpu"))
    tgt = tokenizer.encode_target(tgt_lines)
    tgt_in = torch.full((len(tgt), max(map(len, tgt)) + 1), c.pad_id, dtype=torch.long)
    tgt_out = tgt_in.clone()
    tgt_in[:, 0] = c.start_id
    for row, ids in enumerate(tgt):
        tgt_in[row, 1 : len(ids) + 1] = torch.tensor(ids, dtype=torch.long)
        tgt_out[row, : len(ids) + 1] = torch.tensor(ids + [c.eos_id], dtype=torch.long)
    return model, src, tgt_in, tgt_out


def teacher_forced(
    run: Path, hf_dir: Path, src_lines: list[str], tgt_lines: list[str]
) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits of mtkit's model and of the Marian directory's on the same sources and target prefixes."""
    model, src, tgt_in, tgt_out = forced_batch(run, src_lines, tgt_lines)
    pad = model.cfg.pad_id
    hf = transformers.MarianMTModel.from_pretrained(
        str(hf_dir), attn_implementation="eager", dtype=torch.float32
    ).eval()
    with torch.no_grad():
        ours = model(src, tgt_in)
        theirs = hf(input_ids=src, attention_mask=(src != pad).long(), decoder_input_ids=tgt_in).logits
    real = tgt_out != pad  # positions after a target's end see padding only in mtkit's causal view
    return ours[real], theirs[real]


def valid_loss(run: Path, src_lines: list[str], tgt_lines: list[str]) -> float:
    """Mean cross-entropy per target token, teacher-forced."""
    model, src, tgt_in, tgt_out = forced_batch(run, src_lines, tgt_lines)
    with torch.no_grad():
        logits = model(src, tgt_in)
    return float(torch.nn.functional.cross_entropy(logits.transpose(1, 2), tgt_out, ignore_index=model.cfg.pad_id))


def searched_both(
    run: Path, hf_dir: Path, src_lines: list[str], beam: int, target_lang: str | None = None
) -> list[tuple[list[int], list[int]]]:
    """(mtkit's tokens, generate's tokens) at length penalty 0: of every sentence for greedy search (both end a
    sentence at the cap with a forced eos), of those neither capped for beam search (generate's forced eos at the cap
    costs nothing, mtkit's is scored, so a capped beam ranks differently). `target_lang`: mtkit's
    --target-lang, given to transformers as opus-mt's multilingual models take it, ">>fr<< " before each line."""
    translator = TorchTranslator.load(
        run, device="cpu", beam=beam, length_penalty=0.0, max_len_a=0.0, max_len_b=CAP, target_lang=target_lang
    )
    c = translator.model_cfg
    ours = [hyps[0].tokens for hyps in translator.translate_hypotheses(src_lines)]
    tokenizer = transformers.MarianTokenizer.from_pretrained(str(hf_dir))
    hf = transformers.MarianMTModel.from_pretrained(str(hf_dir), dtype=torch.float32).eval()
    code = f">>{target_lang}<< " if target_lang else ""
    batch = tokenizer([code + line for line in src_lines], return_tensors="pt", padding=True)
    out = hf.generate(
        **batch,
        num_beams=beam,
        length_penalty=0.0,
        early_stopping=True,
        max_length=CAP + 2,
        bad_words_ids=[[i] for i in sorted({c.pad_id, c.bos_id})],
        forced_eos_token_id=c.eos_id,
        min_new_tokens=1,  # mtkit's search never ends a non-empty source at once (fairseq's --min-len)
        do_sample=False,
    )
    theirs = [[t for t in row[1:].tolist() if t not in (c.eos_id, c.pad_id)] for row in out]
    pairs = [(a, b) for a, b in zip(ours, theirs) if beam == 1 or max(len(a), len(b)) < CAP]
    assert len(pairs) >= len(src_lines) // 4, "too few sentences ended before the cap to compare"
    return pairs


# --- export: mtkit -> Hugging Face ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def exported(tiny_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(export_huggingface(tiny_run, tmp_path_factory.mktemp("hf") / "marian")["out"])


def test_export_tokenizer_ids_equal_mtkits(tiny_run: Path, exported: Path, lines: tuple[list[str], list[str]]) -> None:
    ours = TorchTranslator.load(tiny_run, device="cpu").tokenizer.encode(lines[0])
    theirs = transformers.MarianTokenizer.from_pretrained(str(exported))(lines[0])["input_ids"]
    eos = ModelConfig(**load_checkpoint(resolve_checkpoint(tiny_run))["configs"]["model"]).eos_id
    assert theirs == [ids + [eos] for ids in ours]
    card = (exported / "README.md").read_text(encoding="utf-8")
    assert "en -> de" in card and "MarianMTModel.from_pretrained" in card
    generation = json.loads((exported / "generation_config.json").read_text(encoding="utf-8"))
    assert generation["length_penalty"] == 0.0 and generation["num_beams"] == 4


def test_export_logits_equal_mtkits(tiny_run: Path, exported: Path, lines: tuple[list[str], list[str]]) -> None:
    ours, theirs = teacher_forced(tiny_run, exported, *lines)
    torch.testing.assert_close(theirs, ours, atol=1e-5, rtol=0)


@pytest.mark.parametrize("beam", [1, 4])
def test_export_searches_as_mtkit(
    tiny_run: Path, exported: Path, lines: tuple[list[str], list[str]], beam: int
) -> None:
    for ours, theirs in searched_both(tiny_run, exported, lines[0], beam):
        assert ours == theirs


def test_export_import_round_trip_is_bit_identical(tiny_run: Path, exported: Path, tmp_path: Path) -> None:
    run = Path(import_huggingface(exported, tmp_path / "back", TRAIN)["out"])
    before = load_checkpoint(resolve_checkpoint(tiny_run))
    after = load_checkpoint(resolve_checkpoint(run))
    assert ModelConfig(**after["configs"]["model"]) == ModelConfig(**before["configs"]["model"])
    assert list(after["model"]) == list(before["model"])
    for name, tensor in before["model"].items():
        assert torch.equal(after["model"][name], tensor.float()), name


def test_export_refuses_pre_norm_in_one_line(tiny_run: Path, tmp_path: Path) -> None:
    payload = load_checkpoint(resolve_checkpoint(tiny_run))
    payload["configs"]["model"]["norm"] = "pre"
    save_checkpoint(tmp_path / "pre.pt", payload)
    with pytest.raises(UserError, match="norm='pre'") as error:
        export_huggingface(tmp_path / "pre.pt", tmp_path / "out")
    assert "\n" not in str(error.value) and not (tmp_path / "out").exists()


def test_multilingual_export_answers_as_mtkit_given_the_code_in_the_text(
    en_de_fr_run: Path, multi30k: Path, tmp_path: Path
) -> None:
    """MarianTokenizer and MarianMTModel, unmodified, given ">>fr<< text" as opus-mt's multilingual models are used:
    the ids of `mtkit translate --target-lang fr` (the space after the code too), and the same translations."""
    from tests.conftest import MULTILINGUAL_SENTENCES, multilingual_lines

    out = Path(export_huggingface(en_de_fr_run, tmp_path / "hf")["out"])
    lines = multilingual_lines(multi30k, MULTILINGUAL_SENTENCES)["en"]
    tokenizer = transformers.MarianTokenizer.from_pretrained(str(out))
    for lang in ("de", "fr"):
        ours = TorchTranslator.load(en_de_fr_run, target_lang=lang).encode_lines(lines)
        assert tokenizer([f">>{lang}<< {line}" for line in lines])["input_ids"] == [ids + [3] for ids in ours]
    for beam, lang in ((1, "fr"), (4, "fr"), (4, "de")):
        for ours, theirs in searched_both(en_de_fr_run, out, lines, beam, lang):
            assert ours == theirs
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "en -> de, fr (directions: en-de, en-fr)" in card and '">>de<< A man is sleeping."' in card
    assert "language: [en, de, fr]" in card


def test_the_card_of_a_many_to_many_model_names_every_source_and_direction() -> None:
    from mtkit.exports.huggingface import model_card

    corpora = {f"{a}-{b}": {"source_lang": a, "target_lang": b} for a, b in (("en", "de"), ("de", "en"), ("de", "fr"))}
    card = model_card(
        Path("run"),
        {},
        {"source_lang": "en", "target_lang": "de", "corpora": corpora},
        None,
        None,
        ["de", "en", "fr"],
        [("de", "en"), ("de", "fr"), ("en", "de")],
    )
    assert "language: [de, en, fr]" in card
    assert "- Languages: de, en -> de, en, fr (directions: de-en, de-fr, en-de)" in card


# --- import: an opus-mt-shaped Marian model -> mtkit, fine-tuned, exported again ----------------------------------


def train_spm(lines: list[str], path: Path) -> None:
    """A unigram model with sentencepiece's default specials (unk 0, bos 1, eos 2), as opus-mt's are."""
    import io

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines), model_writer=model, vocab_size=400, model_type="unigram", minloglevel=2
    )
    path.write_bytes(model.getvalue())


@pytest.fixture(scope="module")
def opus_dir(tmp_path_factory: pytest.TempPathFactory, multi30k: Path) -> Path:
    """A randomly initialised MarianMTModel shaped as opus-mt-en-de, tiny: two sentencepiece models and a merged
    vocab.json (eos 0, unk 1, pad last), swish, decoder start = pad (zero row), a non-zero final_logits_bias."""
    out = tmp_path_factory.mktemp("opus") / "opus-mt-en-de-tiny"
    out.mkdir()
    pieces: list[str] = []
    for lang, name in (("en", "source.spm"), ("de", "target.spm")):
        train_spm(read_gz_lines(multi30k / f"train.{lang}.gz", 3000), out / name)
        processor = spm.SentencePieceProcessor(model_file=str(out / name))
        pieces += [processor.id_to_piece(i) for i in range(3, processor.get_piece_size())]
    vocab = ["</s>", "<unk>"] + list(dict.fromkeys(pieces)) + ["<pad>"]
    (out / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(vocab)}), encoding="utf-8")
    pad = len(vocab) - 1
    config = transformers.MarianConfig(
        vocab_size=len(vocab),
        decoder_vocab_size=len(vocab),
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        activation_function="swish",
        scale_embedding=True,
        max_position_embeddings=128,
        pad_token_id=pad,
        eos_token_id=0,
        forced_eos_token_id=0,
        decoder_start_token_id=pad,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
        num_beams=4,
    )
    torch.manual_seed(0)
    model = transformers.MarianMTModel(config)
    with torch.no_grad():
        model.model.shared.weight[pad].zero_()
        model.final_logits_bias.normal_(0.0, 0.5)
        model.final_logits_bias[0, 0] += 5.0  # eos likely enough that most sentences end before the cap
    model.save_pretrained(str(out))
    transformers.MarianTokenizer(
        str(out / "source.spm"), str(out / "target.spm"), str(out / "vocab.json"), source_lang="en", target_lang="de"
    ).save_pretrained(str(out))
    return out


@pytest.fixture(scope="module")
def imported(opus_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(import_huggingface(opus_dir, tmp_path_factory.mktemp("imported") / "run", TRAIN)["out"])


def test_import_keeps_marians_ids_and_options(
    opus_dir: Path, imported: Path, lines: tuple[list[str], list[str]]
) -> None:
    translator = TorchTranslator.load(imported, device="cpu")
    theirs = transformers.MarianTokenizer.from_pretrained(str(opus_dir))(lines[0])["input_ids"]
    assert theirs == [ids + [0] for ids in translator.tokenizer.encode(lines[0])]
    c = translator.model_cfg
    assert (c.activation, c.output_bias, c.eos_id, c.pad_id, c.start_id) == (
        "swish",
        True,
        0,
        c.vocab_size - 1,
        c.pad_id,
    )


def test_import_logits_equal_transformers(opus_dir: Path, imported: Path, lines: tuple[list[str], list[str]]) -> None:
    ours, theirs = teacher_forced(imported, opus_dir, *lines)
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=0)


@pytest.mark.parametrize("beam", [1, 4])
def test_import_searches_as_transformers(
    opus_dir: Path, imported: Path, lines: tuple[list[str], list[str]], beam: int
) -> None:
    for ours, theirs in searched_both(imported, opus_dir, lines[0], beam):
        assert ours == theirs


def test_import_refuses_what_mtkit_cannot_represent(tmp_path: Path) -> None:
    transformers.MarianConfig(activation_function="gelu", scale_embedding=True).save_pretrained(str(tmp_path / "gelu"))
    with pytest.raises(UserError, match="config field activation_function='gelu'") as error:
        import_huggingface(tmp_path / "gelu", tmp_path / "run", TRAIN)
    assert "\n" not in str(error.value) and not (tmp_path / "run").exists()


FINE_TUNE_STEPS = 300
# The kill -9 test fine-tunes KILL9_STEPS updates and stops the trainer at these, between two saves (every 25): the
# work since is done again.
KILL9_STEPS, KILLED_AT = 75, (35, 60)
FINE_TUNE_SETS = [
    *TRAIN_SETS,
    "train.lr=5e-3",
    "train.save_interval_steps=25",
    "train.average_last=1",
    "train.keep_last=2",
]


def fine_tune_recipe(imported: Path, data: Path, steps: int = FINE_TUNE_STEPS) -> Any:
    manifest = json.loads((data / "manifest.json").read_text(encoding="utf-8"))
    sets = [*FINE_TUNE_SETS, f"train.max_steps={steps}", f"train.init_from={str(imported)!r}"]
    return resolve_recipe(imported / "recipe.toml", None, sets, vocab_size=manifest["vocab_size"])


@pytest.fixture(scope="module")
def fine_tune_data(imported: Path, multi30k: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Multi30k pairs preprocessed with the imported model's tokenizer."""
    return preprocess_slice(tmp_path_factory.mktemp("fine-tune") / "data", multi30k, imported / "spm.model", 2000, 200)


@pytest.fixture(scope="module")
def fine_tuned(imported: Path, fine_tune_data: Path) -> tuple[Path, Path]:
    """(fine_tune_data, an uninterrupted fine-tuning run on it)."""
    run = fine_tune_data.parent / "run"
    train(fine_tune_data, run, fine_tune_recipe(imported, fine_tune_data))
    return fine_tune_data, run


def test_fine_tuning_lowers_validation_loss(imported: Path, fine_tuned: tuple[Path, Path], multi30k: Path) -> None:
    pairs = read_gz_lines(multi30k / "val.en.gz", 200), read_gz_lines(multi30k / "val.de.gz", 200)
    assert valid_loss(fine_tuned[1], *pairs) < valid_loss(imported, *pairs) - 0.5


@pytest.mark.exactness
def test_fine_tuning_resumes_exactly_after_kill9(imported: Path, fine_tune_data: Path, tmp_path: Path) -> None:
    """Killed twice between saves and run again each time, the fine-tuning ends as an uninterrupted one (trained in
    this process, the same recipe): weights and Adam state bit for bit."""
    data, reference = fine_tune_data, tmp_path / "reference"
    train(data, reference, fine_tune_recipe(imported, data, KILL9_STEPS))
    run, sets = tmp_path / "killed", [arg for item in FINE_TUNE_SETS for arg in ("--set", item)]
    command = mtkit_command(
        "train",
        str(data),
        "--save-dir",
        str(run),
        "-c",
        str(imported / "recipe.toml"),
        "--max-steps",
        str(KILL9_STEPS),
        "--init-from",
        str(imported),
        *sets,
    )
    for kill in range(3):
        resumed_at = newest_step(run)
        trainer = Trainer(command)
        if kill < 2:
            assert trainer.wait_steps(KILLED_AT[kill] - resumed_at), trainer.stderr[-3000:]  # counts this process's
            assert kill9(trainer) == -9
        else:
            assert trainer.finish() == 0, trainer.stderr[-3000:]
        assert newest_step(run) % 25 == 0 and newest_step(run) >= resumed_at
    final = load_checkpoint(list_checkpoints(run)[-1])
    expected = load_checkpoint(list_checkpoints(reference)[-1])
    assert final["step"] == expected["step"] == KILL9_STEPS
    assert not differing_tensors(final["model"], expected["model"])
    assert not differing_tensors(final["optimizer"], expected["optimizer"])


def test_fine_tuned_exports_translate_the_same(
    fine_tuned: tuple[Path, Path], lines: tuple[list[str], list[str]], tmp_path: Path
) -> None:
    run = fine_tuned[1]
    hf_dir = Path(export_huggingface(run, tmp_path / "hf")["out"])
    for ours, theirs in searched_both(run, hf_dir, lines[0], 1):
        assert ours == theirs
    ctranslate2 = pytest.importorskip("ctranslate2")
    ct2_dir = Path(export_ctranslate2(run, tmp_path / "ct2")["out"])
    translator = TorchTranslator.load(run, device="cpu", beam=1, max_len_a=0.0, max_len_b=CAP)
    source = spm.SentencePieceProcessor(model_file=str(ct2_dir / "source.spm"))
    results = ctranslate2.Translator(str(ct2_dir)).translate_batch(
        [source.encode(line, out_type=str) for line in lines[0]],
        beam_size=1,
        max_decoding_length=CAP,
        length_penalty=0,
        min_decoding_length=0,
    )
    pieces = translator.tokenizer.target_pieces()
    for hyps, result in zip(translator.translate_hypotheses(lines[0]), results):
        # CTranslate2 cuts a capped hypothesis where mtkit forces eos: the same greedy pieces either way
        assert [pieces[i] for i in hyps[0].tokens] == result.hypotheses[0]


def test_cli_import_names_the_page_on_fine_tuning(opus_dir: Path, tmp_path: Path) -> None:
    done = run_mtkit_in_process("import", opus_dir, "--out", tmp_path / "run")
    assert done.returncode == 0 and f"-c {tmp_path / 'run'}/recipe.toml --init-from" in done.stdout, done.stdout
    page = done.stdout.rstrip().rsplit("(", 1)[-1].rstrip(")")
    assert (ROOT / page).is_file() and "--init-from" in (ROOT / page).read_text(encoding="utf-8"), done.stdout


def test_cli_import_and_export_errors_are_one_line(tmp_path: Path) -> None:
    for args in (
        ["import", str(tmp_path), "--out", str(tmp_path / "run")],
        ["export", str(tmp_path), "--to", "huggingface", "--out", str(tmp_path / "hf"), "--quantization", "int8"],
    ):
        run = subprocess.run(mtkit_command(*args), capture_output=True, text=True)
        assert run.returncode == 2 and run.stderr.count("\n") == 1 and run.stderr.startswith("error: "), run.stderr
