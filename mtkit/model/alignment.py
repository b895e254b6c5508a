"""Word alignment from a trained Transformer: its cross-attention read out of one teacher-forced decoder pass over a
(source, output) pair, for a glossary's "replace" way. Apart from mtkit.model.transformer, whose forward path
(translation, training) never calls it. Imports torch and the model only.
"""

from __future__ import annotations

import torch
from torch import Tensor

from mtkit.model.transformer import Transformer, alignment_layer, attend_mask


@torch.no_grad()
def cross_attention_weights(model: Transformer, src: Tensor, tgt_in: Tensor, layer: int | None = None) -> Tensor:
    """src [B, S], tgt_in [B, T] (the decoder's start token, then the output) -> [B, T, S]: the cross-attention
    weights of decoder layer `layer` averaged over heads, row t the one that predicts output token t; each row sums
    to 1 over the source's real positions (its eos included, padding 0). By default the layer before the last (the
    last of a one-layer decoder): it aligns best, as Garg et al. (2019) found for the Transformer; on Multi30k val
    with the demo recipe's 3-layer decoder a glossary's "replace" way put 100 random targets in place of the model's
    own word in 71 of 82 sentences by it, 67 by the last layer, 27 by the first (BENCHMARKS.md, "Forced terms").

    Never called by translation or training: it runs the decoder once more, teacher-forced, up to that layer, and
    recomputes softmax(q k^T / sqrt(D/H)) from the layer's own projections of its inputs, so the forward path that
    `attention` serves keeps its kernels, numerics and speed. For word alignments (a glossary's "replace" way).
    """
    memory, src_pad = model.encode(src)
    mask = attend_mask(src_pad)  # [B, 1, 1, S]
    layers = list(model.decoder.layers)
    last = layers[layer if layer is not None else alignment_layer(len(layers))]
    x = model.decoder.embed(tgt_in)
    for block in layers[: layers.index(last)]:
        x = block(x, *block.cross_attn.project_memory(memory), mask)
    r_self, r_cross, _ = last.residuals
    x = r_self.after(x, last.self_attn(r_self.before(x), None, causal=True))
    keys, _ = last.cross_attn.project_memory(memory)  # [B, H, S, D/H]
    return last.cross_attn.weights(last.cross_attn.query(r_cross.before(x)), keys, mask)  # [B, T, S]
