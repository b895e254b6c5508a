"""Word alignment from a trained Transformer: its cross-attention read out of one teacher-forced decoder pass over a
(source, output) pair, for a glossary's "replace" way. Apart from mtkit.model.transformer, whose forward path
(translation, training) never calls it. Imports torch and the model only.
"""

from __future__ import annotations

import torch
from torch import Tensor

from mtkit.model.transformer import Transformer, attend_mask


@torch.no_grad()
def cross_attention_weights(model: Transformer, src: Tensor, tgt_in: Tensor, layer: int = -1) -> Tensor:
    """src [B, S], tgt_in [B, T] (the decoder's start token, then the output) -> [B, T, S]: the cross-attention
    weights of decoder layer `layer` (the last by default) averaged over heads, row t the one that predicts output
    token t; each row sums to 1 over the source's real positions (its eos included, padding 0).

    Never called by translation or training: it runs the decoder once more, teacher-forced, up to that layer, and
    recomputes softmax(q k^T / sqrt(D/H)) from the layer's own projections of its inputs, so the forward path that
    `attention` serves keeps its kernels, numerics and speed. For word alignments (a glossary's "replace" way).
    """
    memory, src_pad = model.encode(src)
    mask = attend_mask(src_pad)  # [B, 1, 1, S]
    layers = list(model.decoder.layers)
    last = layers[layer]
    x = model.decoder.embed(tgt_in)
    for block in layers[: layers.index(last)]:
        x = block(x, *block.cross_attn.project_memory(memory), mask)
    r_self, r_cross, _ = last.residuals
    x = r_self.after(x, last.self_attn(r_self.before(x), None, causal=True))
    cross = last.cross_attn
    keys, _ = cross.project_memory(memory)  # [B, H, S, D/H]
    B, T, D = x.shape
    q = cross.q(r_cross.before(x)).view(B, T, cross.n_heads, D // cross.n_heads).transpose(1, 2)  # [B, H, T, D/H]
    scores = (q.float() @ keys.float().transpose(-1, -2)) / (D // cross.n_heads) ** 0.5  # [B, H, T, S]
    scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(dim=-1).mean(dim=1)  # [B, T, S]
