"""Packed float32 linears: same values as nn.Linear, rows independent of the batch, weights and ties kept."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from torch import nn

from mtkit.engines.torch_engine import TorchTranslator
from mtkit.model import packed
from mtkit.model.packed import PackedLinear, pack_linears
from mtkit.model.transformer import ModelConfig, Transformer
from tests.conftest import read_gz_lines

needs_onednn = pytest.mark.skipif(not packed.onednn_available(), reason="this torch has no oneDNN linear ops")


@needs_onednn
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(7, 48), (5, 1, 48), (0, 48)])
def test_packed_linear_equals_linear(bias: bool, shape: tuple[int, ...]) -> None:
    torch.manual_seed(0)
    linear = nn.Linear(48, 300, bias=bias)
    x = torch.randn(shape)
    with torch.no_grad():
        expected = linear(x)
        got = PackedLinear(linear)(x)
    assert got.shape == expected.shape
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


@needs_onednn
def test_a_row_does_not_depend_on_its_batch() -> None:
    """What keeps translations batch-invariant: row i is bit-identical alone or among 1,200 rows."""
    torch.manual_seed(0)
    layer = PackedLinear(nn.Linear(256, 8000, bias=False))
    x = torch.randn(1200, 256)
    with torch.no_grad():
        full = layer(x)
        for rows in (1, 3, 64, 255, 700):
            assert torch.equal(layer(x[:rows]), full[:rows]), rows


def tiny_model() -> Transformer:
    torch.manual_seed(0)
    return Transformer(
        ModelConfig(vocab_size=120, d_model=32, n_heads=2, d_ff=64, encoder_layers=2, decoder_layers=2)
    ).eval()


@needs_onednn
def test_pack_linears_keeps_weights_ties_and_outputs() -> None:
    model = tiny_model()
    reference = copy.deepcopy(model)
    before = model.state_dict()
    n_linear = sum(isinstance(m, nn.Linear) for m in model.modules())
    assert pack_linears(model) == n_linear > 0
    assert not any(isinstance(m, nn.Linear) for m in model.modules())
    after = model.state_dict()
    assert list(after) == list(before) and all(torch.equal(after[k], before[k]) for k in before)
    assert model.output.weight is model.decoder.embed.tokens.weight  # the tie survives
    for layer in list(model.encoder.layers) + list(model.decoder.layers):  # the ReLU runs inside the first linear
        assert layer.feed_forward.inner.activation == "relu" and type(layer.feed_forward.activation) is nn.Identity
    src = torch.tensor([[5, 6, 7, 3], [8, 9, 3, 0]])
    tgt = torch.tensor([[2, 10, 11], [2, 12, 0]])
    with torch.no_grad():
        torch.testing.assert_close(model(src, tgt), reference(src, tgt), rtol=1e-5, atol=1e-5)


def test_pack_linears_is_a_no_op_without_onednn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(packed, "onednn_available", lambda: False)
    model = tiny_model()
    assert pack_linears(model) == 0
    # per encoder layer qkv, out, 2 FFN; per decoder layer qkv, out, cross q, kv, out, 2 FFN; the output
    assert sum(isinstance(m, nn.Linear) for m in model.modules()) == 2 * 4 + 2 * 7 + 1


def test_pack_linears_leaves_bf16_alone() -> None:
    model = tiny_model().to(torch.bfloat16)
    assert pack_linears(model) == 0


@needs_onednn
def test_packed_translator_translates_as_the_plain_one(tiny_run: Path, multi30k: Path) -> None:
    lines = read_gz_lines(multi30k / "val.en.gz", 60)
    fast = TorchTranslator.load(tiny_run, max_len_b=30)
    plain = TorchTranslator.load(tiny_run, max_len_b=30, packed=False)
    assert any(isinstance(m, PackedLinear) for m in fast.decoder.models[0].modules())
    assert not any(isinstance(m, PackedLinear) for m in plain.decoder.models[0].modules())
    assert fast.translate(lines) == plain.translate(lines)
