"""Training's float32 CPU products through oneDNN: the same values and gradients as F.linear (to float32
rounding), inference and other dtypes untouched, and the switch back to MKL exact."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from mtkit.model import onednn
from mtkit.training.loss import label_smoothed_loss

needs_onednn = pytest.mark.skipif(not onednn.onednn_available(), reason="this torch has no oneDNN linear ops")


@pytest.fixture(autouse=True)
def _restore_backend():
    onednn.set_cpu_matmul("onednn")  # whatever kernels this CPU runs: "auto" takes MKL on AVX2 ones
    yield
    onednn.set_cpu_matmul("auto")


def _grads(layer: torch.nn.Linear, x: torch.Tensor, grad: torch.Tensor, forward) -> list[torch.Tensor]:
    x = x.detach().requires_grad_()
    layer.zero_grad()
    y = forward(x)
    y.backward(grad)
    return [y.detach(), x.grad, layer.weight.grad.clone(), layer.bias.grad.clone()]


@needs_onednn
@pytest.mark.parametrize(("d_in", "d_out"), [(32, 96), (96, 32)])  # both orientations of the weight's gradient
@pytest.mark.parametrize("shape", [(50,), (5, 13)])
def test_linear_values_and_gradients_equal_f_linear(d_in: int, d_out: int, shape: tuple[int, ...]) -> None:
    torch.manual_seed(0)
    layer = onednn.Linear(d_in, d_out)
    x, grad = torch.randn(*shape, d_in), torch.randn(*shape, d_out)
    ours = _grads(layer, x, grad, layer)
    reference = _grads(layer, x, grad, lambda t: F.linear(t, layer.weight, layer.bias))
    for a, b in zip(ours, reference):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    assert ours[2].is_contiguous()


@needs_onednn
def test_training_products_really_go_to_onednn(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forward and both gradients call oneDNN's op when it is chosen, and never when MKL is."""
    calls: list[tuple[int, ...]] = []
    real = onednn.forward_product
    monkeypatch.setattr(
        onednn, "forward_product", lambda a, b, bias=None: calls.append(tuple(a.shape)) or real(a, b, bias)
    )
    layer = onednn.Linear(8, 4)
    layer(torch.randn(6, 8, requires_grad=True)).sum().backward()
    assert len(calls) == 3
    onednn.set_cpu_matmul("mkl")
    layer(torch.randn(6, 8, requires_grad=True)).sum().backward()
    assert len(calls) == 3


def test_inference_other_dtypes_and_mkl_are_f_linear_exactly() -> None:
    """No gradient wanted, bfloat16, float64 or cpu_matmul = mkl: F.linear itself, bit for bit."""
    torch.manual_seed(1)
    layer = onednn.Linear(24, 40)
    x = torch.randn(30, 24)
    with torch.no_grad():
        assert torch.equal(layer(x), F.linear(x, layer.weight, layer.bias))
    double = onednn.Linear(24, 40).double()
    xd = torch.randn(30, 24, dtype=torch.float64, requires_grad=True)
    assert torch.equal(double(xd), F.linear(xd, double.weight, double.bias))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        auto = layer(x.requires_grad_())
        assert auto.dtype == torch.bfloat16
        assert torch.equal(auto, F.linear(x, layer.weight, layer.bias))
    onednn.set_cpu_matmul("mkl")
    assert onednn.cpu_matmul() == "mkl"
    assert torch.equal(layer(x), F.linear(x, layer.weight, layer.bias))


def test_an_unknown_library_is_refused() -> None:
    with pytest.raises(ValueError, match="auto, onednn, mkl"):
        onednn.set_cpu_matmul("blis")


@needs_onednn
def test_the_loss_vocabulary_products_agree_across_libraries() -> None:
    """The fused loss in float32 (1,300 rows: the projection's chunks and a tail) gives MKL's loss and gradients."""
    torch.manual_seed(2)
    hidden, weight = torch.randn(1300, 32), torch.randn(200, 32) * 0.3
    target = torch.randint(0, 200, (1300,))
    results = []
    for library in ("onednn", "mkl"):
        onednn.set_cpu_matmul(library)
        h, w = hidden.clone().requires_grad_(), weight.clone().requires_grad_()
        loss, nll = label_smoothed_loss(h, w, target, 0.1)
        loss.backward()
        results.append((loss.detach(), nll, h.grad, w.grad))
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-4)


def test_a_runs_recipe_sets_the_library() -> None:
    """`mtkit train` applies train.cpu_matmul before its first update (mtkit.training.loop.configure_cpu)."""
    from mtkit.training.config import TrainConfig
    from mtkit.training.loop import configure_cpu

    configure_cpu(TrainConfig(cpu_matmul="mkl"))
    assert onednn.cpu_matmul() == "mkl"
    configure_cpu(TrainConfig(cpu_matmul="onednn"))
    assert onednn.cpu_matmul() == ("onednn" if onednn.onednn_available() else "mkl")


@needs_onednn
@pytest.mark.parametrize(("avx512", "expected"), [(True, "onednn"), (False, "mkl")])
def test_auto_takes_onednn_on_avx512_kernels_only(monkeypatch: pytest.MonkeyPatch, avx512: bool, expected: str) -> None:
    from mtkit.training.config import TrainConfig
    from mtkit.training.loop import configure_cpu

    monkeypatch.setattr(onednn, "_avx512_kernels", lambda: avx512)
    configure_cpu(TrainConfig())  # the default: auto
    assert onednn.cpu_matmul() == expected
