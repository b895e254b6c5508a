"""Invariants of mtkit.model.transformer: causality, padding invariance, cache == no cache, SDPA == reference."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from mtkit.errors import UserError
from mtkit.model import transformer as model_module
from mtkit.model.layers import Dropout, sinusoidal_positions
from mtkit.model.transformer import ModelConfig, Transformer, attend_mask


def expected_parameters(cfg: ModelConfig) -> int:
    """Closed-form parameter count of Transformer(cfg)."""
    d_model, d_ff = cfg.d_model, cfg.d_ff
    attention_params = 4 * d_model * d_model + 4 * d_model  # q, k, v, out projections with biases
    feed_forward = 2 * d_model * d_ff + d_ff + d_model
    norm = 2 * d_model
    encoder_layer = attention_params + feed_forward + 2 * norm
    decoder_layer = 2 * attention_params + feed_forward + 3 * norm
    final_norms = 2 * norm if cfg.norm == "pre" else 0
    target_tables = {"all": 0, "decoder": 1, "none": 2}[cfg.share_embeddings]  # target embedding, output
    embeddings = (cfg.vocab_size + target_tables * cfg.target_vocab_size) * d_model
    output_bias = cfg.target_vocab_size if cfg.output_bias else 0
    positions = 2 * cfg.max_positions * d_model if cfg.positions == "learned" else 0
    layers = cfg.encoder_layers * encoder_layer + cfg.decoder_layers * decoder_layer
    return layers + final_norms + embeddings + output_bias + positions


def count_parameters(model: nn.Module) -> int:
    """Number of parameters, tied ones counted once."""
    unique = {id(p): p for p in model.parameters()}
    return sum(p.numel() for p in unique.values())


VOCAB = 40
PAD, BOS, EOS = 0, 2, 3


def tiny_model(norm: str = "post", **overrides) -> Transformer:
    torch.manual_seed(0)
    cfg = ModelConfig.preset("tiny", vocab_size=VOCAB, norm=norm, max_positions=64, **overrides)
    return Transformer(cfg).eval()


def sentence(length: int, generator: torch.Generator, first: int | None = None) -> torch.Tensor:
    """Random real tokens (never pad/bos/eos), optionally starting with `first`."""
    tokens = torch.randint(4, VOCAB, (length,), generator=generator)
    if first is not None:
        tokens[0] = first
    return tokens


def pad_batch(rows: list[torch.Tensor]) -> torch.Tensor:
    """[B, max len], padded at the end."""
    return torch.nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=PAD)


def reference_attention(q, k, v, mask, causal, dropout_p):
    """softmax(QK^T / sqrt(d_k)) V written out, -inf on illegal connections."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # [B, H, L, S]
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    if causal:
        L, S = scores.shape[-2:]
        future = torch.ones(L, S, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


# Config


def test_presets_and_overrides() -> None:
    base = ModelConfig.preset("base")
    assert (base.d_model, base.n_heads, base.d_ff, base.encoder_layers, base.dropout) == (512, 8, 2048, 6, 0.1)
    big = ModelConfig.preset("big", vocab_size=37000)
    assert (big.d_model, big.n_heads, big.d_ff, big.dropout, big.vocab_size) == (1024, 16, 4096, 0.3, 37000)
    assert ModelConfig.preset("small").d_model == 256
    assert ModelConfig() == ModelConfig.preset("base", vocab_size=8000)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(d_model=100, n_heads=8), "divisible"),
        (dict(norm="sandwich"), "norm"),
        (dict(positions="rotary"), "positions"),
        (dict(share_embeddings="encoder"), "share_embeddings"),
        (dict(dropout=1.0), "dropout"),
        (dict(vocab_size=3), "eos_id"),
        (dict(decoder_layers=0), "decoder_layers"),
    ],
)
def test_config_validation(kwargs: dict, words: str) -> None:
    """A bad value is a UserError naming the [model] key, in one line."""
    with pytest.raises(UserError, match=rf"^model\..*{words}") as refused:
        ModelConfig(**kwargs)
    assert "\n" not in str(refused.value)


def test_unknown_preset_lists_valid_names() -> None:
    with pytest.raises(UserError, match="base, big, small, tiny"):
        ModelConfig.preset("huge")


# Pure arithmetic


def test_sinusoidal_positions_by_hand() -> None:
    table = sinusoidal_positions(3, 4)  # 10000^(2i/4) = 1 for i = 0, 100 for i = 1
    expected = torch.tensor(
        [
            [0.0, 1.0, 0.0, 1.0],
            [math.sin(1), math.cos(1), math.sin(0.01), math.cos(0.01)],
            [math.sin(2), math.cos(2), math.sin(0.02), math.cos(0.02)],
        ]
    )
    torch.testing.assert_close(table, expected)
    wide = sinusoidal_positions(60, 512)
    assert wide[50, 300] == pytest.approx(math.sin(50 / 10000 ** (300 / 512)), abs=1e-6)
    assert wide[50, 301] == pytest.approx(math.cos(50 / 10000 ** (300 / 512)), abs=1e-6)


def test_attend_mask_by_hand() -> None:
    pad = torch.tensor([[False, False, True], [True, True, True]])
    mask = attend_mask(pad)
    assert mask.shape == (2, 1, 1, 3)
    # An all-pad row attends everywhere rather than nowhere (NaN in some backends).
    assert mask[:, 0, 0].tolist() == [[True, True, False], [True, True, True]]


def test_reference_attention_agrees_with_sdpa_directly() -> None:
    torch.manual_seed(1)
    q, k, v = (torch.randn(2, 3, 5, 4) for _ in range(3))
    mask = attend_mask(torch.tensor([[False] * 5, [False, False, False, True, True]]))
    for m, causal in [(mask, False), (None, True), (None, False)]:
        want = reference_attention(q, k, v, m, causal, 0.0)
        torch.testing.assert_close(model_module.attention(q, k, v, m, causal, 0.0), want)  # the CPU path
        torch.testing.assert_close(F.scaled_dot_product_attention(q, k, v, m, is_causal=causal), want)  # other devices'


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cpu_training_attention_values_and_gradients_match_reference(dtype: torch.dtype) -> None:
    """The CPU path (GEMMs in the input dtype, float32 softmax) against the float64 reference, with autograd."""
    torch.manual_seed(3)
    mask = attend_mask(torch.tensor([[False] * 6, [False, False, False, False, True, True]]))
    for m, causal in [(mask, False), (None, True)]:
        leaves = [torch.randn(2, 3, 6, 8, dtype=torch.float64, requires_grad=True) for _ in range(3)]
        upstream = torch.randn(2, 3, 6, 8, dtype=torch.float64)
        (reference_attention(*leaves, m, causal, 0.0) * upstream).sum().backward()
        expected = [x.grad.clone() for x in leaves]
        inputs = [x.detach().to(dtype).requires_grad_() for x in leaves]
        out = model_module.attention(*inputs, m, causal, 0.0)
        assert out.dtype == dtype
        (out * upstream.to(dtype)).sum().backward()
        tol = 1e-5 if dtype == torch.float32 else 5e-2
        torch.testing.assert_close(
            out.double(), reference_attention(*leaves, m, causal, 0.0).detach(), atol=tol, rtol=tol
        )
        for got, want in zip(inputs, expected):
            torch.testing.assert_close(got.grad.double(), want, atol=tol, rtol=tol)


# Whole-model invariants


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_causality(norm: str) -> None:
    model = tiny_model(norm)
    g = torch.Generator().manual_seed(2)
    src = torch.stack([sentence(6, g), sentence(6, g)])
    tgt = torch.stack([sentence(7, g, BOS), sentence(7, g, BOS)])
    with torch.no_grad():
        before = model(src, tgt)
        for t in range(6):
            changed = tgt.clone()
            changed[:, t + 1 :] = torch.randint(4, VOCAB, changed[:, t + 1 :].shape, generator=g)
            after = model(src, changed)
            torch.testing.assert_close(after[:, : t + 1], before[:, : t + 1], atol=1e-6, rtol=0)
            assert not torch.allclose(after[:, t + 1 :], before[:, t + 1 :])


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_padding_invariance(norm: str) -> None:
    """A sentence's logits do not depend on the longer sentences padded beside it."""
    model = tiny_model(norm)
    g = torch.Generator().manual_seed(3)
    srcs = [sentence(4, g), sentence(9, g), sentence(6, g)]
    tgts = [sentence(3, g, BOS), sentence(8, g, BOS), sentence(5, g, BOS)]
    with torch.no_grad():
        batched = model(pad_batch(srcs), pad_batch(tgts))
        for i, (src, tgt) in enumerate(zip(srcs, tgts)):
            alone = model(src[None], tgt[None])[0]
            torch.testing.assert_close(batched[i, : len(tgt)], alone, atol=1e-5, rtol=0)


def test_all_pad_source_row_is_finite_and_isolated() -> None:
    model = tiny_model()
    g = torch.Generator().manual_seed(4)
    src = pad_batch([sentence(5, g), torch.zeros(5, dtype=torch.long)])
    tgt = torch.stack([sentence(4, g, BOS), sentence(4, g, BOS)])
    with torch.no_grad():
        logits = model(src, tgt)
        assert torch.isfinite(logits).all()
        torch.testing.assert_close(logits[0], model(src[:1], tgt[:1])[0], atol=1e-5, rtol=0)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_incremental_decoding_equals_full_forward(norm: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """decode_step with beam expansion, reorders and cache growth == forward on the same rows."""
    monkeypatch.setattr(model_module, "_FIRST_CAPACITY", 2)  # grows at step 1 and, after the reorders, at step 5
    model = tiny_model(norm)
    g = torch.Generator().manual_seed(5)
    beams, steps = 3, 7
    src = pad_batch([sentence(5, g), sentence(8, g), sentence(3, g)])
    sources = torch.arange(3).repeat_interleave(beams)  # [N] source of each row
    tgt = torch.stack([sentence(steps, g, BOS) for _ in sources])  # [N, steps], rows differ
    within_beams = torch.arange(3 * beams).view(3, beams).flip(1).reshape(-1)  # keeps sources
    drop_middle = torch.tensor([0, 1, 2, 6, 7, 8])  # sentence 1's beams finished
    shuffle = torch.randperm(2 * beams, generator=g)  # moves rows between sources
    orders = {2: within_beams, 3: drop_middle, 4: shuffle}
    groups = {2: beams, 3: beams, 4: 1}  # rows per stored source entry after each reorder
    with torch.no_grad():
        state = model.init_decode_state(src)
        state = model.reorder_decode_state(state, sources)
        assert state.group == beams and state.memory_mask.shape[0] == 3  # source side stored once per sentence
        for t in range(steps):
            if t in orders:
                before = state.layers[0].cross_keys
                state = model.reorder_decode_state(state, orders[t])
                sources, tgt = sources[orders[t]], tgt[orders[t]]
                assert state.group == groups[t]
                assert state.layers[0].keys.shape[2] == t + 1  # a reorder leaves room for exactly one more position
                assert (state.layers[0].cross_keys is before) == (t == 2)  # a beam step copies no source side
            logits = model.decode_step(tgt[:, t], state)
            full = model(src[sources], tgt[:, : t + 1])[:, t]
            torch.testing.assert_close(logits, full, atol=1e-5, rtol=0)
    assert state.position == steps


def test_reorder_can_drop_rows() -> None:
    """Also runs with autograd on: decoding turns it off itself (its caches are written in place)."""
    model = tiny_model()
    g = torch.Generator().manual_seed(6)
    src = pad_batch([sentence(5, g), sentence(7, g)])
    tgt = torch.stack([sentence(3, g, BOS), sentence(3, g, BOS)])
    state = model.init_decode_state(src)
    model.decode_step(tgt[:, 0], state)
    state = model.reorder_decode_state(state, torch.tensor([1]))  # sentence 0 finished
    model.decode_step(tgt[1:, 1], state)
    logits = model.decode_step(tgt[1:, 2], state)
    torch.testing.assert_close(logits, model(src[1:], tgt[1:])[:, 2], atol=1e-5, rtol=0)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_sdpa_equals_reference_attention(norm: str, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tiny_model(norm)
    g = torch.Generator().manual_seed(7)
    src = pad_batch([sentence(4, g), sentence(9, g)])
    tgt = pad_batch([sentence(3, g, BOS), sentence(6, g, BOS)])
    with torch.no_grad():
        fast = model(src, tgt)
        monkeypatch.setattr(model_module, "attention", reference_attention)
        slow = model(src, tgt)
    real = tgt != PAD
    torch.testing.assert_close(fast[real], slow[real], atol=1e-5, rtol=0)


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_training_kernel_equals_inference_kernel(norm: str) -> None:
    """Training mode with autograd on and off gives the same outputs (dropout off)."""
    model = tiny_model(norm, dropout=0.0).train()
    g = torch.Generator().manual_seed(12)
    src = pad_batch([sentence(4, g), sentence(9, g)])
    tgt = pad_batch([sentence(3, g, BOS), sentence(6, g, BOS)])
    with_grad = model(src, tgt)
    with torch.no_grad():
        without_grad = model(src, tgt)
    real = tgt != PAD
    torch.testing.assert_close(with_grad[real], without_grad[real], atol=1e-5, rtol=0)


def test_project_only_real_positions() -> None:
    """The training loop projects only non-pad targets; that equals selecting from forward."""
    model = tiny_model()
    g = torch.Generator().manual_seed(8)
    src = pad_batch([sentence(4, g), sentence(6, g)])
    tgt = pad_batch([sentence(2, g, BOS), sentence(5, g, BOS)])
    real = tgt != PAD
    with torch.no_grad():
        hidden = model.decode(tgt, *model.encode(src))
        torch.testing.assert_close(model.project(hidden[real]), model(src, tgt)[real])


def test_too_long_sequence_raises() -> None:
    model = tiny_model()
    with pytest.raises(ValueError, match="max_positions"):
        model(torch.ones(1, 65, dtype=torch.long), torch.ones(1, 3, dtype=torch.long))


# Parameters and initialisation


def test_parameter_counts_of_paper_models() -> None:
    with torch.device("meta"):
        base = Transformer(ModelConfig.preset("base", vocab_size=37000))
        big = Transformer(ModelConfig.preset("big", vocab_size=37000))
    assert count_parameters(base) == expected_parameters(base.cfg)
    assert count_parameters(big) == expected_parameters(big.cfg)
    assert 62e6 < count_parameters(base) < 64e6  # paper: 65M (its vocabulary differs slightly)
    assert 213e6 < count_parameters(big) < 215e6  # paper: 213M


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("positions", ["sinusoidal", "learned"])
@pytest.mark.parametrize("share", ["all", "decoder", "none"])
def test_share_embeddings_ties_and_counts(share: str, positions: str, norm: str) -> None:
    model = tiny_model(norm, share_embeddings=share, positions=positions)
    src = model.encoder.embed.tokens.weight.data_ptr()
    tgt = model.decoder.embed.tokens.weight.data_ptr()
    out = model.output.weight.data_ptr()
    assert (src == tgt, tgt == out, src == out) == {
        "all": (True, True, True),
        "decoder": (False, True, False),
        "none": (False, False, False),
    }[share]
    assert count_parameters(model) == expected_parameters(model.cfg)
    shared_all = expected_parameters(replace(model.cfg, share_embeddings="all"))
    copies = {"all": 0, "decoder": 1, "none": 2}[share]
    assert count_parameters(model) == shared_all + copies * VOCAB * model.cfg.d_model


def test_fairseq_like_initialisation() -> None:
    torch.manual_seed(0)
    model = Transformer(ModelConfig.preset("small", vocab_size=2000, encoder_layers=1, decoder_layers=1))
    embedding = model.encoder.embed.tokens.weight
    assert embedding[PAD].abs().sum() == 0
    assert embedding[1:].std().item() == pytest.approx(256**-0.5, rel=0.05)
    qkv = model.encoder.layers[0].self_attn.qkv
    bound = math.sqrt(6 / (256 + 256)) / math.sqrt(2)  # per-projection xavier, gain 1/sqrt(2)
    assert qkv.weight.abs().max() <= bound and qkv.weight.abs().max() > 0.9 * bound
    assert qkv.bias.abs().sum() == 0


# Precision and compilation


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_bf16_autocast_training_step_on_cpu(norm: str) -> None:
    model = tiny_model(norm, attention_dropout=0.1, activation_dropout=0.1).train()
    g = torch.Generator().manual_seed(9)
    src = pad_batch([sentence(5, g), sentence(8, g)])
    tgt = pad_batch([sentence(4, g, BOS), sentence(7, g, BOS)])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(src, tgt)
        loss = F.cross_entropy(logits.float().flatten(0, 1), tgt.flatten(), ignore_index=PAD)
    loss.backward()
    assert torch.isfinite(loss)
    assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None)
    model.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        state = model.reorder_decode_state(model.init_decode_state(src), torch.tensor([0, 0, 1, 1]))
        assert torch.isfinite(model.decode_step(torch.full((4,), BOS), state)).all()


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # raised inside torch's compiler
def test_torch_compile_matches_eager() -> None:
    model = tiny_model("pre", dropout=0.0, encoder_layers=1, decoder_layers=1).train()
    g = torch.Generator().manual_seed(10)
    src = pad_batch([sentence(5, g), sentence(7, g)])
    tgt = pad_batch([sentence(4, g, BOS), sentence(6, g, BOS)])
    compiled_loss = torch.compile(model)(src, tgt).logsumexp(-1).mean()
    compiled_loss.backward()
    compiled_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    eager_loss = model(src, tgt).logsumexp(-1).mean()
    eager_loss.backward()
    torch.testing.assert_close(compiled_loss, eager_loss, atol=1e-4, rtol=0)
    for compiled, p in zip(compiled_grads, model.parameters()):
        torch.testing.assert_close(compiled, p.grad, atol=1e-4, rtol=0)


def test_dropout_rate_scale_and_eval_identity() -> None:
    torch.manual_seed(0)
    drop = Dropout(0.1)
    x = torch.ones(1000, 257)  # odd element count: the last 16-bit word is half used
    y = drop(x)
    kept = y != 0
    assert abs(1 - kept.float().mean().item() - 0.1) < 0.005
    assert torch.allclose(y[kept], torch.full_like(y[kept], 1 / 0.9))
    assert abs(y.mean().item() - 1.0) < 0.01  # inverted dropout keeps the expectation
    xg = torch.ones(1000, 257, dtype=torch.bfloat16, requires_grad=True)
    torch.manual_seed(0)
    yg = drop(xg)
    assert yg.dtype == torch.bfloat16 and torch.equal(yg.float() != 0, kept)  # same torch seed, same mask
    (yg.float() * 3).sum().backward()
    assert torch.equal(xg.grad.float(), yg.detach().float() * 3)  # gradient = mask * scale * upstream
    drop.eval()
    assert drop(x) is x
    assert Dropout(0.0)(x) is x


# Options of models trained elsewhere (mtkit.exports.huggingface): swish, output bias, decoder start, target vocabulary


def test_added_options_defaults_are_the_checkpoint_defaults() -> None:
    """checkpoint.ADDED_MODEL_DEFAULTS stands for the options a checkpoint written before them lacks."""
    import dataclasses

    from mtkit.runs.checkpoint import ADDED_MODEL_DEFAULTS

    defaults = {f.name: f.default for f in dataclasses.fields(ModelConfig)}
    assert {name: defaults[name] for name in ADDED_MODEL_DEFAULTS} == ADDED_MODEL_DEFAULTS
    assert (
        ModelConfig().start_id == ModelConfig().bos_id and ModelConfig().target_vocab_size == ModelConfig().vocab_size
    )


@pytest.mark.parametrize(
    "options",
    [
        dict(activation="swish"),
        dict(output_bias=True),
        dict(decoder_start_id=0),
        dict(share_embeddings="none", tgt_vocab_size=VOCAB + 7, output_bias=True),
        dict(share_embeddings="decoder", tgt_vocab_size=VOCAB - 5),
    ],
)
def test_added_options_keep_cache_equal_to_no_cache_and_counts(options: dict) -> None:
    model = tiny_model(**options)
    assert count_parameters(model) == expected_parameters(model.cfg)
    g = torch.Generator().manual_seed(3)
    src = sentence(7, g)[None]
    tgt_in = torch.cat([torch.tensor([[model.cfg.start_id]]), sentence(5, g)[None] % model.cfg.target_vocab_size], 1)
    with torch.no_grad():
        full = model(src, tgt_in)  # [1, T, V]
        state = model.init_decode_state(src)
        steps = torch.stack([model.decode_step(tgt_in[:, t], state) for t in range(tgt_in.shape[1])], 1)
    assert full.shape[-1] == model.cfg.target_vocab_size
    torch.testing.assert_close(steps, full, atol=1e-5, rtol=1e-5)


def test_swish_and_output_bias_change_the_output() -> None:
    relu, swish = tiny_model(), tiny_model(activation="swish")
    swish.load_state_dict(relu.state_dict())
    src, tgt = torch.tensor([[5, 6, 7, EOS]]), torch.tensor([[BOS, 8, 9]])
    with torch.no_grad():
        assert not torch.allclose(relu(src, tgt), swish(src, tgt))
        biased = tiny_model(output_bias=True)
        biased.load_state_dict({**relu.state_dict(), "output.bias": torch.arange(VOCAB, dtype=torch.float32)})
        torch.testing.assert_close(biased(src, tgt), relu(src, tgt) + torch.arange(VOCAB, dtype=torch.float32))


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(activation="gelu"), "activation"),
        (dict(tgt_vocab_size=50), "share_embeddings='all'"),
        (dict(decoder_start_id=8000), "decoder_start_id"),
    ],
)
def test_added_options_validation(kwargs: dict, words: str) -> None:
    with pytest.raises(UserError, match=words):
        ModelConfig(**kwargs)
