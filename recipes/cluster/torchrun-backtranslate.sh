#!/usr/bin/env bash
# Back-translation of one large monolingual file by several processes, one GPU each, on one machine or several,
# without Slurm. Each process translates one shard; the one that completes the set merges it into OUT.TGT and
# OUT.SRC (docs/many-machines.md). Two ways to start them, from the project's root:
#   torchrun (the default): each process takes its shard from torchrun's RANK and WORLD_SIZE, and torchrun restarts
#   the processes after one dies (MAX_RESTARTS); with NNODES > 1 every machine waits until all have joined.
#     PROCS=4 bash recipes/cluster/torchrun-backtranslate.sh                  # one machine, 4 GPUs
#     NNODES=2 NODE_RANK=0 HEAD=node0 PROCS=4 bash recipes/cluster/torchrun-backtranslate.sh   # on node0
#     NNODES=2 NODE_RANK=1 HEAD=node0 PROCS=4 bash recipes/cluster/torchrun-backtranslate.sh   # on node1
#   LAUNCHER=plain: PROCS background processes given --shard K/N, no rendezvous: each machine starts whenever it
#   can, and NODE_RANK only says which shards are its own (machine R runs shards R x PROCS + 1 to (R + 1) x PROCS).
#     LAUNCHER=plain NNODES=2 NODE_RANK=1 PROCS=4 bash recipes/cluster/torchrun-backtranslate.sh
# Either way, running it again goes on: a killed shard from its last whole chunk, a finished one only tries the
# merge. If no process could merge (one failed), run it again, or merge a complete set by hand: mtkit merge-shards OUT
# Never run across real machines nor on GPUs yet: recipes/cluster/README.md says what has run.
set -euo pipefail

# The reverse model (a RUN_DIR or a checkpoint), translating from the monolingual text's language.
MODEL=${MODEL:-runs/de-en}
# The monolingual file (plain or .gz), the same file for every process (read whole by each to count its lines).
INPUT=${INPUT:-mono.de}
# OUT.TGT and OUT.SRC and the shards' files beside them: on a file system every machine sees.
OUT=${OUT:-bt}
# Sampling's seed: each chunk is seeded from it and its place, so the shards sample what one process samples.
SEED=${SEED:-1}
# cuda, one GPU per process (CUDA_VISIBLE_DEVICES narrowed to one of those visible), or cpu (each process then
# takes OMP_NUM_THREADS threads: the machine's cores / PROCS unless it is set).
DEVICE=${DEVICE:-cuda}
# Processes per machine (on GPUs: at most one per GPU), machines, this machine's number from 0 (0 on the head).
PROCS=${PROCS:-4}
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
# torchrun's rendezvous (unused by LAUNCHER=plain): the head's address as the others reach it, a free port there.
HEAD=${HEAD:-localhost}
PORT=${PORT:-29500}
RDZV_ID=${RDZV_ID:-mtkit-backtranslate}
MAX_RESTARTS=${MAX_RESTARTS:-3}
LAUNCHER=${LAUNCHER:-torchrun}
# The virtual environment holding mtkit and torchrun (`make install` makes .venv).
VENV=${VENV:-.venv}

venv_bin=$(cd "$VENV/bin" && pwd)
export PATH="$venv_bin:$PATH"
if [[ $DEVICE == cpu && -z ${OMP_NUM_THREADS:-} ]]; then
    threads=$(($(nproc) / PROCS))
    export OMP_NUM_THREADS=$((threads > 0 ? threads : 1))
fi

# Narrow this process to GPU $1 among those the machine lets it see (all, or CUDA_VISIBLE_DEVICES's list).
use_gpu() {
    [[ $DEVICE == cpu ]] && return 0
    local visible=()
    IFS=, read -ra visible <<<"${CUDA_VISIBLE_DEVICES:-}"
    if ((${#visible[@]} > 0)); then
        export CUDA_VISIBLE_DEVICES=${visible[$1]}
    else
        export CUDA_VISIBLE_DEVICES=$1
    fi
}

if [[ ${1:-} == --worker ]]; then
    # One of torchrun's processes (torchrun runs this script again with --worker): RANK and WORLD_SIZE give the shard.
    use_gpu "$LOCAL_RANK"
    exec mtkit back-translate "$MODEL" --input "$INPUT" --out "$OUT" --seed "$SEED" --device "$DEVICE"
fi

case $LAUNCHER in
torchrun)
    if [[ $NODE_RANK == 0 ]]; then is_host=1; else is_host=0; fi
    exec torchrun --nnodes "$NNODES" --nproc-per-node "$PROCS" \
        --rdzv-backend c10d --rdzv-endpoint "$HEAD:$PORT" --rdzv-id "$RDZV_ID" --rdzv-conf "is_host=$is_host" \
        --max-restarts "$MAX_RESTARTS" --no-python bash "$0" --worker
    ;;
plain)
    total=$((NNODES * PROCS))
    pids=()
    for ((k = 1; k <= PROCS; k++)); do
        shard=$((NODE_RANK * PROCS + k))
        (
            use_gpu $((k - 1))
            exec mtkit back-translate "$MODEL" --input "$INPUT" --out "$OUT" --seed "$SEED" --device "$DEVICE" \
                --shard "$shard/$total"
        ) &
        pids+=($!)
    done
    failed=0
    for pid in "${pids[@]}"; do
        wait "$pid" || failed=1
    done
    exit "$failed"
    ;;
*)
    echo "LAUNCHER=$LAUNCHER: torchrun or plain" >&2
    exit 2
    ;;
esac
