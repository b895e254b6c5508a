#!/usr/bin/env python3
"""Where does fairseq's CPU training step spend its time?  (optional diagnostic, not one of the measures)
Builds the bench model/criterion/optimizer through fairseq's own API (same args as bench_fairseq.sh), runs
WARM untimed updates, then PROF updates under torch.profiler and prints: wall split forward+loss / backward /
optimizer, and the top ops by self CPU time.
Run with the fairseq venv python:  OMP_NUM_THREADS=2 profile_fairseq.py DATA_BIN [WARM=5] [PROF=15]
"""

import os
import sys
import tempfile
import time

import torch
from fairseq import options, tasks
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from torch.profiler import ProfilerActivity, profile, record_function

data_bin = sys.argv[1]
warm = int(sys.argv[2]) if len(sys.argv) > 2 else 5
nprof = int(sys.argv[3]) if len(sys.argv) > 3 else 15
# bench_fairseq.sh's ARCH (model, loss, optimiser, batches), so the profile is of the model Measure A times
argv = [
    data_bin,
    *"--arch transformer --share-all-embeddings --encoder-layers 3 --decoder-layers 3".split(),
    *"--encoder-embed-dim 256 --decoder-embed-dim 256".split(),
    *"--encoder-ffn-embed-dim 1024 --decoder-ffn-embed-dim 1024".split(),
    *"--encoder-attention-heads 4 --decoder-attention-heads 4 --dropout 0.1".split(),
    *"--criterion label_smoothed_cross_entropy --label-smoothing 0.1".split(),
    *"--optimizer adam --adam-betas (0.9,0.98) --lr 1e-3 --lr-scheduler inverse_sqrt --warmup-updates 1000".split(),
    *"--max-tokens 4096 --cpu --num-workers 0 --seed 1".split(),
    "--save-dir",
    tempfile.mkdtemp(),
]
args = options.parse_args_and_arch(options.get_training_parser(), argv)
cfg = convert_namespace_to_omegaconf(args)
torch.manual_seed(1)
task = tasks.setup_task(cfg.task)
task.load_dataset("train", epoch=1, combine=True)
model = task.build_model(cfg.model)
crit = task.build_criterion(cfg.criterion)
opt = torch.optim.Adam(model.parameters(), lr=5e-4, betas=(0.9, 0.98), eps=1e-8)  # fairseq's Adam ~ torch Adam
itr = task.get_batch_iterator(
    dataset=task.dataset("train"),
    max_tokens=4096,
    max_positions=(1024, 1024),
    ignore_invalid_inputs=True,
    required_batch_size_multiple=8,
    seed=1,
    num_workers=0,
    epoch=1,
).next_epoch_itr(shuffle=True)
batches = [next(itr) for _ in range(warm + nprof)]
model.train()
tt = {"fwd+loss": 0.0, "backward": 0.0, "optimizer": 0.0}


def step(b, timed):
    t0 = time.perf_counter()
    with record_function("FWD_LOSS"):
        loss, ss, _ = crit(model, b)
    t1 = time.perf_counter()
    with record_function("BACKWARD"):
        opt.zero_grad(set_to_none=True)
        loss.backward()
    t2 = time.perf_counter()
    with record_function("OPTIM"):
        opt.step()
    t3 = time.perf_counter()
    if timed:
        tt["fwd+loss"] += t1 - t0
        tt["backward"] += t2 - t1
        tt["optimizer"] += t3 - t2


for b in batches[:warm]:
    step(b, False)
with profile(activities=[ProfilerActivity.CPU]) as prof:
    for b in batches[warm:]:
        step(b, True)
tot = sum(tt.values())
ntok = sum(int(b["ntokens"]) for b in batches[warm:])
print(
    f"{nprof} updates, {ntok} tgt tokens, {tot:.2f}s under profiler -> {ntok / tot:.0f} tgt tok/s "
    f"(profiler adds overhead)"
)
print("split: " + ", ".join(f"{k} {v / tot * 100:.0f}%" for k, v in tt.items()))
print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=18, max_name_column_width=40))
sys.stdout.flush()
os._exit(0)
