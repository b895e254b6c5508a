#!/usr/bin/env bash
# Multi-node training with torchrun alone, without Slurm: run this on each node, from the project's root, a folder
# every node sees (a shared file system), with the node's number (0 on the head) and the head's address:
#   bash recipes/cluster/torchrun-train.sh 0 node0.example.org     # on node0
#   bash recipes/cluster/torchrun-train.sh 1 node0.example.org     # on node1
#   NNODES=4 GPUS_PER_NODE=8 RUN=runs/big bash recipes/cluster/torchrun-train.sh "$NODE_RANK" "$HEAD"
# The arguments may be given as the variables NODE_RANK and HEAD instead. torchrun waits until all NNODES nodes
# have joined. Never run across real machines yet: recipes/cluster/README.md says what has run.
set -euo pipefail

# This node's number, 0 to NNODES - 1: node 0 hosts the rendezvous at HEAD:PORT. The c10d rendezvous numbers the
# ranks itself, so rank 0 (checkpoints and logs) may be on any node.
NODE_RANK=${1:-${NODE_RANK:?give the node number (0 on the head) as the first argument or NODE_RANK}}
# The head node's address (host name or IP), as the other nodes reach it.
HEAD=${2:-${HEAD:?give the head node address as the second argument or HEAD}}
NNODES=${NNODES:-2}
# Ranks per node, one per GPU.
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
# The preprocessed data (`mtkit preprocess --out DATA`) and the recipe.
DATA=${DATA:-data/wmt14-en-de}
RECIPE=${RECIPE:-recipes/wmt14-en-de/big.toml}
# The run directory, on a file system every node sees. Running this again with the same RUN (on every node)
# resumes from the newest checkpoint.
RUN=${RUN:-runs/wmt14-en-de-big}
# The batch rule of the recipes: max_tokens x update_freq x ranks ~= the tokens per update the recipe was made for
# (wmt14's: 6250 x 4 x 1 = 25,000); max_tokens is worked out from these two (2 nodes x 8 GPUs: 1562). A micro-batch
# must still hold one pair of max_len + 1 tokens (257 for wmt14), so raise UPDATE_FREQ on many GPUs.
TOKENS_PER_UPDATE=${TOKENS_PER_UPDATE:-25000}
UPDATE_FREQ=${UPDATE_FREQ:-1}
# How many times torchrun restarts the ranks after one dies; each restart goes on from the newest checkpoint.
MAX_RESTARTS=${MAX_RESTARTS:-3}
PORT=${PORT:-29500}
# The same on every node, and another for another run started at the same HEAD:PORT.
RDZV_ID=${RDZV_ID:-mtkit-train}
# The virtual environment holding mtkit and torchrun (`make install` makes .venv): `torchrun --no-python mtkit`
# runs the `mtkit` command it finds on PATH.
VENV=${VENV:-.venv}

venv_bin=$(cd "$VENV/bin" && pwd)
export PATH="$venv_bin:$PATH"
# torchrun guesses whether it is the host from the endpoint's name; saying it avoids a wrong guess (an alias, an IP
# of another interface).
if [[ $NODE_RANK == 0 ]]; then is_host=1; else is_host=0; fi
max_tokens=$((TOKENS_PER_UPDATE / (NNODES * GPUS_PER_NODE * UPDATE_FREQ)))
echo "node $NODE_RANK of $NNODES x $GPUS_PER_NODE GPUs, rendezvous at $HEAD:$PORT," \
    "max_tokens $max_tokens x update_freq $UPDATE_FREQ, run in $RUN" >&2

exec torchrun --nnodes "$NNODES" --nproc-per-node "$GPUS_PER_NODE" \
    --rdzv-backend c10d --rdzv-endpoint "$HEAD:$PORT" --rdzv-id "$RDZV_ID" --rdzv-conf "is_host=$is_host" \
    --max-restarts "$MAX_RESTARTS" \
    --no-python mtkit train "$DATA" --save-dir "$RUN" --config "$RECIPE" \
    --set "train.max_tokens=$max_tokens" --set "train.update_freq=$UPDATE_FREQ"
