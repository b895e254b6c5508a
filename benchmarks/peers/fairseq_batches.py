#!/usr/bin/env python3
"""Reconstruct the first N training batches that fairseq-train builds for the bench config (same task args,
seed 1, --max-tokens 4096, required_batch_size_multiple 8, shuffle each epoch) and print, per update:
    step  src_tokens  tgt_tokens  sentences
(non-padding counts; fairseq appends EOS to both sides, tgt_tokens == the 'wpb' fairseq logs for that update).
Used only to get exact source-token counts for Measure A; bench_fairseq.sh cross-checks tgt against the log.
Run with the fairseq venv python: fairseq_batches.py DATA_BIN N
"""

import os
import sys
import tempfile

from fairseq import options, tasks
from fairseq.dataclass.utils import convert_namespace_to_omegaconf


def main(data_bin, n):
    parser = options.get_training_parser()
    argv = "--arch transformer --max-tokens 4096 --seed 1 --cpu --num-workers 0 --share-all-embeddings".split()
    args = options.parse_args_and_arch(parser, [data_bin, *argv, "--save-dir", tempfile.mkdtemp()])
    cfg = convert_namespace_to_omegaconf(args)
    task = tasks.setup_task(cfg.task)
    task.load_dataset(cfg.dataset.train_subset, epoch=1, combine=True)
    ds = task.dataset(cfg.dataset.train_subset)
    pad = task.source_dictionary.pad()
    epoch_itr = task.get_batch_iterator(
        dataset=ds,
        max_tokens=cfg.dataset.max_tokens,
        max_sentences=cfg.dataset.batch_size,
        max_positions=(1024, 1024),
        ignore_invalid_inputs=True,
        required_batch_size_multiple=cfg.dataset.required_batch_size_multiple,
        seed=cfg.common.seed,
        num_shards=1,
        shard_id=0,
        num_workers=0,
        epoch=1,
        data_buffer_size=cfg.dataset.data_buffer_size,
        disable_iterator_cache=False,
        skip_remainder_batch=cfg.optimization.skip_remainder_batch,
        grouped_shuffling=cfg.dataset.grouped_shuffling,
        update_epoch_batch_itr=cfg.dataset.update_epoch_batch_itr,
    )
    step = 0
    print("# step src_tok(incl EOS) tgt_tok(incl EOS) sents")
    while step < n:
        itr = epoch_itr.next_epoch_itr(shuffle=True)
        for b in itr:
            step += 1
            src = int((b["net_input"]["src_tokens"] != pad).sum())
            print(step, src, int(b["ntokens"]), int(b["nsentences"]), flush=True)
            if step >= n:
                break


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
    sys.stdout.flush()
    # leave without interpreter teardown: the unfinished epoch iterator's background thread otherwise
    # aborts the process ("terminate called without an active exception") after all rows were written
    os._exit(0)
