"""Inference-only CPU linears whose float32 weight is reordered once into oneDNN's blocked layout.

PyTorch runs a float32 nn.Linear on CPU through MKL's sgemm. In a beam-4 decode of test_2016_flickr
on our 2-core test machine, oneDNN with pre-packed weights spends 10% less time in the linears (3.99 s
against 4.45 s under torch.profiler), so translation is about 1.07x faster (BENCHMARKS.md). Its result
for a row is bit-identical however many rows come with it (MKL's is not), which is what lets batching
never change a translation. bfloat16 linears already go through oneDNN, so only float32 is packed.
A ReLU that follows a packed linear (a module's `inner` linear and `activation`, as mtkit.model.transformer's
FeedForward) runs inside it as oneDNN's post-op: the same values without a second pass over [N, d_ff].
Imports torch only.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mtkit.model.onednn import Linear, onednn_available

ROWS_HINT = 256  # rows oneDNN tunes the layout for: a decoding step's typical sentences x beams


class PackedLinear(nn.Module):
    """Computes what `linear` computes (to float32 rounding), for inference only: no autograd.

    `weight` and `bias` stay registered, so state_dict keys and tied weights are unchanged; the packed
    copy is taken now, so pack after loading weights, not before.
    """

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight = linear.weight
        self.bias = linear.bias
        self._packed = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach(), ROWS_HINT)
        self._bias = None if linear.bias is None else linear.bias.detach()
        self.activation = "none"  # or "relu": applied to the output inside the same oneDNN call

    def forward(self, x: Tensor) -> Tensor:
        return torch.ops.mkldnn._linear_pointwise(x, self._packed, self._bias, self.activation, [], "")


def pack_linears(model: nn.Module) -> int:
    """Replace every float32 CPU nn.Linear of `model` by a PackedLinear; returns how many were replaced.

    A no-op (0) where oneDNN is missing, fails, or disagrees with the original linear on a probe row.
    """
    if not onednn_available():
        return 0
    targets = [
        (name, module)
        for name, module in model.named_modules()
        if type(module) in (nn.Linear, Linear)
        and module.weight.dtype == torch.float32
        and module.weight.device.type == "cpu"
    ]
    packed: dict[str, PackedLinear] = {}
    with torch.no_grad():
        for name, linear in targets:
            probe = torch.linspace(-1.0, 1.0, linear.in_features)[None]
            try:
                layer = PackedLinear(linear)
                agrees = torch.allclose(layer(probe), F.linear(probe, linear.weight, linear.bias), rtol=1e-4, atol=1e-4)
            except RuntimeError:  # a torch whose private oneDNN ops changed: keep the plain linears
                return 0
            if not agrees:
                return 0
            packed[name] = layer
    for name, layer in packed.items():
        parent, _, attr = name.rpartition(".")
        setattr(model.get_submodule(parent), attr, layer)
    for module in model.modules():
        if (
            isinstance(getattr(module, "inner", None), PackedLinear)
            and type(getattr(module, "activation", None)) is nn.ReLU
        ):
            module.inner.activation = "relu"
            module.activation = nn.Identity()
    return len(packed)
