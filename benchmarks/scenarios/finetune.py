"""Fine-tuning a random opus-mt-en-de-shaped Marian model (d512, 6+6, swish, vocabulary 58,101, tied): `mtkit
train --init-from` its import (the baseline) against transformers' Seq2SeqTrainer on the same pairs, fp32, label
smoothing 0.1, no weight decay, alternating rounds of fresh child processes. Seq2SeqTrainer takes `batch` sentences
per update, mtkit a token budget of `batch` x the mean padded pair length. Seq2SeqTrainer needs accelerate.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from harness import ROOT, WORK, alternate, child_program, medians, ratios, read_lines, write_results

OUT = WORK / "finetune"
MULTI30K = ROOT / "data" / "multi30k"
VOCAB = 58101  # opus-mt-en-de's


def read_pairs(n: int) -> tuple[list[str], list[str]]:
    return read_lines(MULTI30K / "train.en.gz", n), read_lines(MULTI30K / "train.de.gz", n)


def build_marian(out: Path, pieces_per_side: int) -> None:
    """The opus-mt-shaped model directory: source.spm, target.spm, vocab.json (eos 0, unk 1, pad last), weights."""
    import sentencepiece as spm
    import torch
    import transformers

    out.mkdir(parents=True)
    pieces: list[str] = []
    for lines, name in zip(read_pairs(29000), ("source.spm", "target.spm")):
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(lines),
            model_writer=model,
            vocab_size=pieces_per_side,
            model_type="unigram",
            hard_vocab_limit=False,
            minloglevel=2,
        )
        (out / name).write_bytes(model.getvalue())
        processor = spm.SentencePieceProcessor(model_proto=model.getvalue())
        pieces += [processor.id_to_piece(i) for i in range(3, processor.get_piece_size())]
    real = ["</s>", "<unk>"] + list(dict.fromkeys(pieces))
    vocab = real + [f"<unused_{i}>" for i in range(VOCAB - 1 - len(real))] + ["<pad>"]
    (out / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(vocab)}), encoding="utf-8")
    pad = len(vocab) - 1
    config = transformers.MarianConfig(
        vocab_size=len(vocab),
        decoder_vocab_size=len(vocab),
        d_model=512,
        encoder_layers=6,
        decoder_layers=6,
        encoder_attention_heads=8,
        decoder_attention_heads=8,
        encoder_ffn_dim=2048,
        decoder_ffn_dim=2048,
        activation_function="swish",
        scale_embedding=True,
        max_position_embeddings=512,
        pad_token_id=pad,
        eos_token_id=0,
        forced_eos_token_id=0,
        decoder_start_token_id=pad,
        dropout=0.1,
        num_beams=4,
    )
    torch.manual_seed(0)
    model = transformers.MarianMTModel(config)
    with torch.no_grad():
        model.model.shared.weight[pad].zero_()
    model.save_pretrained(str(out))
    transformers.MarianTokenizer(
        str(out / "source.spm"), str(out / "target.spm"), str(out / "vocab.json"), source_lang="en", target_lang="de"
    ).save_pretrained(str(out))


def prepare(pairs: int, pieces_per_side: int) -> None:
    """OUT/marian, OUT/imported (mtkit import) and OUT/data (the first `pairs` pairs, the imported tokenizer)."""
    mtkit = [sys.executable, "-m", "mtkit"]
    if not (OUT / "marian").is_dir():
        shutil.rmtree(OUT / "marian.partial", ignore_errors=True)
        build_marian(OUT / "marian.partial", pieces_per_side)
        (OUT / "marian.partial").rename(OUT / "marian")
    if not (OUT / "imported").is_dir():
        subprocess.run([*mtkit, "import", str(OUT / "marian"), "--out", str(OUT / "imported")], check=True)
    data = OUT / f"data-{pairs}"
    if not data.is_dir():
        prefix = OUT / f"pairs-{pairs}"
        for lang, lines in zip(("en", "de"), read_pairs(pairs)):
            Path(f"{prefix}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
        subprocess.run(
            [
                *mtkit,
                "preprocess",
                "-s",
                "en",
                "-t",
                "de",
                "--train",
                str(prefix),
                "--max-len",
                "1000",
                "--spm-model",
                str(OUT / "imported" / "spm.model"),
                "--out",
                str(data),
            ],
            check=True,
        )


def summarize(seconds: list[float], tokens: list[int], sentences: list[int], skip: int) -> dict:
    timed = slice(skip, None)
    return {
        "tokens_per_s": round(sum(tokens[timed]) / sum(seconds[timed]), 1),
        "updates_timed": len(seconds[timed]),
        "sentences_per_update": round(statistics.mean(sentences), 1),
    }


def run_mtkit(args: argparse.Namespace) -> dict:
    """mtkit train --init-from the imported run, in this process; per-update times from metrics.jsonl."""
    import numpy as np

    from mtkit.corpus.batching import epoch_batches
    from mtkit.corpus.binarized import ParallelData
    from mtkit.recipe import resolve_recipe
    from mtkit.training.loop import train

    data, save = OUT / f"data-{args.pairs}", OUT / "mtkit-run"
    shutil.rmtree(save, ignore_errors=True)
    split = ParallelData.open(data, "train", "en", "de")
    mean_width = float(np.mean(np.maximum(split.src_lens, split.tgt_lens) + 1))
    sets = [
        f"train.max_steps={args.steps}",
        f"train.max_tokens={round(args.batch * mean_width)}",
        "train.seed=1",
        "train.log_interval=1",
        "train.precision='fp32'",
        "train.device='cpu'",
        f"train.threads={args.threads}",
        "train.save_interval_minutes=0",
        "train.warmup_steps=10",
        "train.lr=5e-5",
        "train.label_smoothing=0.1",
        f"train.init_from={str(OUT / 'imported')!r}",
    ]
    manifest = json.loads((data / "manifest.json").read_text(encoding="utf-8"))
    train(data, save, resolve_recipe(OUT / "imported" / "recipe.toml", None, sets, vocab_size=manifest["vocab_size"]))
    records = [json.loads(line) for line in (save / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    records = [r for r in records if "tokens_per_s" in r]
    tokens = [r["src_tokens"] + r["tgt_tokens"] for r in records]
    seconds = [t / r["tokens_per_s"] for t, r in zip(tokens, records)]
    budget = round(args.batch * mean_width)
    sentences = [len(batch) for batch in epoch_batches(split.src_lens, split.tgt_lens, budget, 1, 1)]  # the epoch's
    return summarize(seconds, tokens, sentences, args.skip)


def run_transformers(args: argparse.Namespace) -> dict:
    """Seq2SeqTrainer on the same pairs: per-update times from a callback, token counts from the collator."""
    import torch
    import transformers

    torch.set_num_threads(args.threads)
    transformers.utils.logging.set_verbosity_error()
    tokenizer = transformers.MarianTokenizer.from_pretrained(str(OUT / "marian"))
    model = transformers.MarianMTModel.from_pretrained(str(OUT / "marian"), dtype=torch.float32)
    src, tgt = read_pairs(args.pairs)
    encoded = tokenizer(src, text_target=tgt)
    dataset = [{"input_ids": ids, "labels": labels} for ids, labels in zip(encoded["input_ids"], encoded["labels"])]
    counts: list[tuple[int, int]] = []
    collate = transformers.DataCollatorForSeq2Seq(tokenizer, model=model)

    def counting_collate(features: list[dict]) -> dict:
        batch = collate(features)
        counts.append((int(batch["attention_mask"].sum() + (batch["labels"] != -100).sum()), len(features)))
        return batch

    times: list[float] = []

    class StepTimes(transformers.TrainerCallback):
        def on_step_begin(self, *_: object, **__: object) -> None:
            self.start = time.perf_counter()

        def on_step_end(self, *_: object, **__: object) -> None:
            times.append(time.perf_counter() - self.start)

    options = transformers.Seq2SeqTrainingArguments(
        output_dir=str(OUT / "hf-run"),
        per_device_train_batch_size=args.batch,
        max_steps=args.steps,
        learning_rate=5e-5,
        warmup_steps=10,
        weight_decay=0.0,
        label_smoothing_factor=0.1,
        train_sampling_strategy="group_by_length",
        save_strategy="no",
        report_to=[],
        logging_steps=10**9,
        use_cpu=True,
        dataloader_num_workers=0,
        adam_beta1=0.9,
        adam_beta2=0.98,
        seed=1,
        disable_tqdm=True,
    )
    trainer = transformers.Seq2SeqTrainer(
        model=model, args=options, train_dataset=dataset, data_collator=counting_collate, callbacks=[StepTimes()]
    )
    trainer.train()
    return summarize(times, [c[0] for c in counts[: len(times)]], [c[1] for c in counts[: len(times)]], args.skip)


SIZES = {
    "small": {"steps": 12, "skip": 2, "batch": 16, "pairs": 2000},
    "full": {"steps": 60, "skip": 5, "batch": 32, "pairs": 10000},
}


def worker(args: argparse.Namespace) -> None:
    """One engine's fine-tuning in this process (`run.py finetune --worker E`): prints RESULT and its figures."""
    sizes = argparse.Namespace(**SIZES["small" if args.small else "full"], threads=2)
    result = run_mtkit(sizes) if args.worker == "mtkit" else run_transformers(sizes)
    print("RESULT " + json.dumps(result), flush=True)


def run(args: argparse.Namespace) -> None:
    if args.worker:
        return worker(args)
    sizes = SIZES["small" if args.small else "full"]
    prepare(sizes["pairs"], 8000)
    programs = {"mtkit": child_program("finetune", "mtkit", args.small)}
    if importlib.util.find_spec("accelerate"):  # Seq2SeqTrainer refuses to start without it
        programs["Seq2SeqTrainer"] = child_program("finetune", "transformers", args.small)
    else:
        print("Seq2SeqTrainer left out: accelerate is not installed", file=sys.stderr)
    results = alternate(programs, args.rounds)
    rel = ratios(results)
    rows = [
        {
            "program": name,
            "updates": f"{sizes['skip'] + 1}-{sizes['steps']}",
            **medians(r),
            "tok/s vs mtkit": rel[name].get("tokens_per_s"),
        }
        for name, r in results.items()
    ]
    write_results("finetune", {"rounds": results, "sizes": sizes}, rows)
