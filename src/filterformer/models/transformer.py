"""The Transformer backbone: embeddings, blocks with any attention per layer, layer fusion."""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor, nn

from ..attention import AttentionContext, AttentionMaps, DecodingCache, build_attention
from ..nn import InputEmbedding, LayerFusion, TransformerBlock
from .config import TransformerConfig
from .saved_model import SavesPretrained

__all__ = ["Transformer", "TransformerOutput"]


@dataclass
class TransformerOutput:
    """What :class:`Transformer` returns.

    Attributes:
        last_hidden_state: ``(B, N, D)``: the fused layers when fusion is on, after the final
            LayerNorm of a pre-LN model.
        hidden_states: on request, the embedding output then every block's output (the residual
            stream, before any final norm), each ``(B, N, D)``.
        attention_maps: on request, one :class:`AttentionMaps` per block (small N only).
        aux_loss: the blocks' weighted auxiliary losses (e.g. AGF's regulariser), or None.
        cache: the decoding cache passed in, now holding these positions too.
    """

    last_hidden_state: Tensor
    hidden_states: tuple[Tensor, ...] | None = None
    attention_maps: tuple[AttentionMaps, ...] | None = None
    aux_loss: Tensor | None = None
    cache: DecodingCache | None = None


class Transformer(nn.Module, SavesPretrained):
    """A stack of Transformer blocks whose attention is chosen per layer by the config's method
    (:attr:`TransformerConfig.method`, :meth:`~filterformer.method_spec.MethodSpec.for_layer`).

    Args:
        config: a :class:`TransformerConfig`.
    """

    def __init__(self, config: TransformerConfig) -> None:
        super().__init__()
        self.config = config
        self.embed = InputEmbedding(
            config.dim,
            vocab_size=config.vocab_size,
            input_dim=config.input_dim,
            max_len=config.max_len,
            position=config.position,
            dropout=config.dropout,
        )
        self.blocks = nn.ModuleList(self._block(i) for i in range(config.depth))
        self.norm = nn.LayerNorm(config.dim, config.norm_eps) if config.norm == "pre" else None
        self.fusion = None
        if config.method.fusion is not None:
            fused = config.depth + int(config.fusion_include_embeddings)
            self.fusion = LayerFusion(config.method.fusion, config.dim, fused)

    def _block(self, index: int) -> TransformerBlock:
        c = self.config
        # The spec says what each block runs: its per-layer parts only where ``layers`` selects.
        layer = c.method.for_layer(index)
        attention = build_attention(
            layer.attention,
            c.dim,
            c.num_heads,
            qkv_bias=c.qkv_bias,
            attn_drop=c.attn_dropout,
            proj_drop=c.dropout,
            causal=c.causal,
            neutreno_lambda=layer.neutreno_lambda,
            neutreno_learnable=layer.neutreno_learnable,
            **layer.options,
        )
        return TransformerBlock(
            c.dim, attention, mlp_ratio=c.mlp_ratio, dropout=c.dropout, norm=c.norm,
            norm_eps=c.norm_eps,
        )

    def new_cache(self, bucket: int | None = None) -> DecodingCache:
        """An empty decoding cache for this model (causal models only), whose buffers grow by
        ``bucket`` positions (:data:`~filterformer.attention.CACHE_BUCKET` when None)."""
        if not self.config.causal:
            raise ValueError("decoding caches need a causal model (TransformerConfig.causal=True)")
        return DecodingCache(len(self.blocks), bucket)

    def forward(
        self,
        input_ids: Tensor | None = None,
        *,
        inputs: Tensor | None = None,
        inputs_embeds: Tensor | None = None,
        padding_mask: Tensor | None = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
        cache: DecodingCache | None = None,
    ) -> TransformerOutput:
        """Run the stack.

        Args:
            input_ids: ``(B, N)`` token ids, or
            inputs: ``(B, N, input_dim)`` continuous features, or
            inputs_embeds: ``(B, N, D)`` ready embeddings (e.g. Graph-Bridge tokens).
            padding_mask: ``(B, N)`` bool, True at real tokens (with a cache: ``(B, past + N)``).
            output_hidden_states: return every layer's output.
            output_attentions: record explicit N×N attention and filter matrices (small N).
            cache: a :meth:`new_cache` to decode incrementally; it is updated in place.

        Returns:
            :class:`TransformerOutput`.
        """
        if cache is not None and output_attentions:
            raise ValueError("output_attentions is not available while decoding with a cache")
        offset = 0 if cache is None else cache.length
        x = self.embed(input_ids, inputs=inputs, inputs_embeds=inputs_embeds, offset=offset)
        context = AttentionContext(output_attentions=output_attentions)
        keep = output_hidden_states or self.fusion is not None
        hidden = [x] if keep else None
        for i, block in enumerate(self.blocks):
            layer_cache = None if cache is None else cache.layers[i]
            x = block(x, padding_mask=padding_mask, context=context, cache=layer_cache)
            if keep:
                hidden.append(x)
        if self.fusion is not None:
            x = self.fusion(hidden if self.config.fusion_include_embeddings else hidden[1:])
        if self.norm is not None:
            x = self.norm(x)
        return TransformerOutput(
            last_hidden_state=x,
            hidden_states=tuple(hidden) if output_hidden_states else None,
            attention_maps=tuple(context.attention_maps) if output_attentions else None,
            aux_loss=context.aux_loss(),
            cache=cache,
        )
