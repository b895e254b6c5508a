"""TensorBoard scalars of a training run (`train.tensorboard_dir`), through the optional extra mtkit[tensorboard].

metrics.jsonl stays the source of truth: rundir.MetricsLog hands every record it writes to TensorBoardLog, which
only plots it again. Nothing here knows the training loop or the model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mtkit.errors import UserError

# metrics.jsonl key -> TensorBoard tag (a record's other keys are counts and times, not curves to watch).
SCALARS = {
    "loss": "train/loss",
    "nll": "train/nll",
    "ppl": "train/ppl",
    "lr": "train/lr",
    "tokens_per_s": "train/tokens_per_s",
    "grad_norm": "train/grad_norm",
    "valid_loss": "valid/loss",
    "valid_ppl": "valid/ppl",
    "valid_bleu": "valid/bleu",
}
# Several language pairs: a validation key with the pair after a slash is one more curve, valid_loss/en-de ->
# valid/loss/en-de, beside the pooled valid/loss.
PER_PAIR = ("valid_loss", "valid_ppl", "valid_bleu")
INSTALL_HINT = "train.tensorboard_dir (--tensorboard) needs the tensorboard package: pip install -e '.[tensorboard]'"


def require_tensorboard() -> None:
    """Raise the one-line install hint unless torch.utils.tensorboard can write event files."""
    try:
        import tensorboard  # noqa: F401  (torch.utils.tensorboard imports it lazily, on first use)
        from torch.utils.tensorboard import SummaryWriter  # noqa: F401
    except ImportError:
        raise UserError(INSTALL_HINT) from None


class TensorBoardLog:
    """Event files in `log_dir` with the scalars of each metrics record at its step; flushed after every record,
    so a killed run loses no more of TensorBoard's curves than of metrics.jsonl."""

    def __init__(self, log_dir: Path, start_step: int) -> None:
        require_tensorboard()
        from torch.utils.tensorboard import SummaryWriter

        # A run resumed from step S redoes the steps after S, as MetricsLog drops their records: purge_step hides
        # what a killed process had plotted for them, so each step is shown once.
        self.writer = SummaryWriter(str(log_dir), purge_step=start_step + 1 if start_step else None)

    def __call__(self, record: dict[str, Any]) -> None:
        for key, tag in SCALARS.items():
            if key in record:
                self.writer.add_scalar(tag, record[key], record["step"])
        for key, value in record.items():
            base, _, pair = key.partition("/")
            if pair and base in PER_PAIR:
                self.writer.add_scalar(f"{SCALARS[base]}/{pair}", value, record["step"])
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
