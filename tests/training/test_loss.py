"""The label-smoothed loss by hand: fairseq's smoothed distribution, the fused backward, bf16 autocast."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from mtkit.training.loss import dense_label_smoothed_loss, label_smoothed_loss


def test_label_smoothed_loss_matches_explicit_distribution() -> None:
    torch.manual_seed(0)
    logits, target, eps = torch.randn(7, 11), torch.randint(0, 11, (7,)), 0.1
    loss, nll = label_smoothed_loss(logits, torch.eye(11), target, eps)  # identity projection
    lprobs = F.log_softmax(logits, -1)
    q = torch.full_like(lprobs, eps / 10)
    q[torch.arange(7), target] += 1 - eps - eps / 10  # fairseq's smoothed target distribution
    assert torch.allclose(q.sum(-1), torch.ones(7))
    assert loss.item() == pytest.approx(-(q * lprobs).sum().item(), rel=1e-5)
    assert nll.item() == pytest.approx(F.cross_entropy(logits, target, reduction="sum").item(), rel=1e-5)
    plain, _ = label_smoothed_loss(logits, torch.eye(11), target, 0.0)
    assert plain.item() == pytest.approx(nll.item())


@pytest.mark.parametrize("epsilon", [0.0, 0.1])
@pytest.mark.parametrize("rows", [9, 1300])  # 1300 crosses both the softmax and the projection chunk sizes
def test_label_smoothed_loss_gradient_equals_autograd_reference(epsilon: float, rows: int) -> None:
    """The fused projection + backward (softmax - q) equals autograd through linear + log_softmax."""
    torch.manual_seed(1)
    hidden = torch.randn(rows, 5, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(13, 5, dtype=torch.float64, requires_grad=True)
    target = torch.randint(0, 13, (rows,))
    loss, nll = label_smoothed_loss(hidden, weight, target, epsilon)
    assert not nll.requires_grad
    (0.7 * loss).backward()
    fused = hidden.grad.clone(), weight.grad.clone()
    hidden.grad = weight.grad = None
    lprobs = F.log_softmax(F.linear(hidden, weight), -1)
    ref_nll = -lprobs.gather(-1, target[:, None]).squeeze(-1)
    eps_i = epsilon / 12
    ref = ((1 - epsilon - eps_i) * ref_nll + eps_i * -lprobs.sum(-1)).sum()
    assert loss.item() == pytest.approx(ref.item(), rel=1e-6)
    assert nll.item() == pytest.approx(ref_nll.sum().item(), rel=1e-6)
    (0.7 * ref).backward()
    assert torch.allclose(fused[0], hidden.grad, atol=1e-6)
    assert torch.allclose(fused[1], weight.grad, atol=1e-6)


def test_label_smoothed_loss_with_output_bias_equals_autograd_reference() -> None:
    """ModelConfig.output_bias: the fused loss adds the bias to every row and returns its gradient."""
    torch.manual_seed(2)
    hidden = torch.randn(300, 5, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(13, 5, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(13, dtype=torch.float64, requires_grad=True)
    target = torch.randint(0, 13, (300,))
    loss, _ = label_smoothed_loss(hidden, weight, target, 0.1, bias)
    loss.backward()
    fused = hidden.grad.clone(), weight.grad.clone(), bias.grad.clone()
    hidden.grad = weight.grad = bias.grad = None
    dense, _ = dense_label_smoothed_loss(hidden, weight, target, 0.1, -1, bias)
    assert loss.item() == pytest.approx(dense.item(), rel=1e-6)
    dense.backward()
    for ours, reference in zip(fused, (hidden.grad, weight.grad, bias.grad)):
        assert torch.allclose(ours, reference, atol=1e-6)


def test_label_smoothed_loss_under_bf16_autocast_matches_float32() -> None:
    """Under autocast the projection runs in bf16 (as nn.Linear would) and the gradients come back float32."""
    torch.manual_seed(2)
    hidden = torch.randn(300, 16, requires_grad=True)
    weight = torch.randn(50, 16, requires_grad=True)
    target = torch.randint(0, 50, (300,))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss, _ = label_smoothed_loss(hidden, weight, target, 0.1)
    loss.backward()
    assert hidden.grad.dtype == weight.grad.dtype == torch.float32
    ref, _ = label_smoothed_loss(hidden.detach(), weight.detach(), target, 0.1)
    assert loss.item() == pytest.approx(ref.item(), rel=2e-2)
    assert loss.item() != ref.item()  # bf16 logits really were used


@pytest.mark.parametrize("epsilon", [0.0, 0.1])
def test_dense_gpu_path_equals_the_cpu_path(epsilon: float, request: pytest.FixtureRequest) -> None:
    """The GPU path (every row, pad targets weighted 0, no boolean index) gives the CPU path's loss, nll and
    gradients: the pad rows contribute nothing. Both paths' products on MKL, as F.linear's autograd runs the dense
    one (mtkit.model.onednn's loss products are compared with MKL's in tests/model/test_onednn.py)."""
    from mtkit.model.onednn import set_cpu_matmul
    from mtkit.training.loss import dense_label_smoothed_loss

    set_cpu_matmul("mkl")
    request.addfinalizer(lambda: set_cpu_matmul("auto"))  # the process-wide default the other tests expect
    torch.manual_seed(3)
    pad = 0
    hidden = torch.randn(600, 16, requires_grad=True)
    weight = torch.randn(50, 16, requires_grad=True)
    target = torch.randint(1, 50, (600,))
    target[torch.rand(600) < 0.3] = pad
    keep = target != pad
    loss, nll = label_smoothed_loss(hidden[keep], weight, target[keep], epsilon)
    loss.backward()
    expected = hidden.grad.clone(), weight.grad.clone()
    hidden.grad = weight.grad = None
    dense, dense_nll = dense_label_smoothed_loss(hidden, weight, target, epsilon, pad)
    dense.backward()
    assert not dense_nll.requires_grad
    torch.testing.assert_close(dense, loss, rtol=1e-5, atol=0)
    torch.testing.assert_close(dense_nll, nll, rtol=1e-5, atol=0)
    assert hidden.grad[~keep].abs().max() == 0  # pad rows get no gradient
    torch.testing.assert_close(hidden.grad, expected[0], rtol=0, atol=1e-5)
    torch.testing.assert_close(weight.grad, expected[1], rtol=0, atol=1e-5)


def test_compiling_the_model_leaves_the_loss_out_of_the_graph() -> None:
    """compile_model compiles the encoder-decoder once: batches of one shape with different pad counts (a
    different boolean-index size in the CPU loss) reuse the graph, and the result equals eager."""
    from torch._dynamo.testing import CompileCounter

    from mtkit.model.transformer import ModelConfig, Transformer
    from mtkit.training.loss import LossModule

    torch.manual_seed(0)
    module = LossModule(Transformer(ModelConfig.preset("tiny", vocab_size=60, dropout=0.0)), 0.1, pad_id=0)
    eager = [module(*batch) for batch in (_batch(3), _batch(5))]
    counter = CompileCounter()
    module.compile_model(backend=counter)
    compiled = [module(*batch) for batch in (_batch(3), _batch(5))]
    assert counter.frame_count == 1
    for (loss, nll), (ref_loss, ref_nll) in zip(compiled, eager):
        torch.testing.assert_close(loss, ref_loss)
        torch.testing.assert_close(nll, ref_nll)


def _batch(pads: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """src, tgt_in, tgt_out [4, 8] with `pads` pad positions at the end of the target rows."""
    gen = torch.Generator().manual_seed(pads)
    src, tgt = torch.randint(4, 60, (4, 8), generator=gen), torch.randint(4, 60, (4, 8), generator=gen)
    tgt.view(-1)[-pads:] = 0
    return src, tgt, tgt
