"""Causal language modelling and generation with a decoding cache."""

from __future__ import annotations

import math
from contextlib import nullcontext
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..attention import DecodingCache
from ..checks import check_integer
from ..nn.embeddings import ids_chosen_by_the_model
from .config import TransformerConfig
from .saved_model import SavesPretrained
from .transformer import Transformer

__all__ = ["CausalLM", "CausalLMOutput"]


@dataclass
class CausalLMOutput:
    """Attributes:
    logits: ``(B, N, vocab_size)``.
    loss: next-token cross-entropy (ignoring label -100) plus the auxiliary loss, given labels.
    aux_loss: the backbone's auxiliary loss, or None.
    cache: the updated decoding cache, when one was passed.
    hidden_states: as :class:`~filterformer.models.TransformerOutput`.
    """

    logits: Tensor
    loss: Tensor | None = None
    aux_loss: Tensor | None = None
    cache: DecodingCache | None = None
    hidden_states: tuple[Tensor, ...] | None = None


class CausalLM(nn.Module, SavesPretrained):
    """A causal Transformer with a language-modelling head tied to the token embedding.

    Decoding with a cache keeps each layer's keys and values, and what a method needs at past
    positions besides them (GFSA: ``ĀV``). NeuTRENO's term is position-wise: at every step the
    first layer recomputes V⁰ for exactly the new positions, so it needs nothing cached.

    At initialisation (``scripts/causal_lm_init.py``: the default config, 256 tokens, 5 seeds)
    the tied N(0, 0.02²) table gives logits of std ≈ 0.22 and a first next-token loss on random
    tokens within 1% of ln(vocab_size) = 5.545: 5.572 at depth 2, 5.576 at depth 4, 5.569 at
    depth 8, 5.564 at depth 12. Greedy decoding does not collapse to one token for every prompt,
    but some prompts do fall into a one-token loop (18–46% of 16-token continuations, more at
    depth 8 and 12). nanoGPT's scaled residual projections (std 0.02/sqrt(2·depth)) leave the loss
    as it is and make such loops more frequent (79–100%): with a weak residual branch the tied
    embedding's self-similarity makes each token predict itself. So the residual projections keep
    PyTorch's default init (the committed experiments used it).

    Args:
        config: a causal :class:`TransformerConfig` with ``vocab_size``.
        tie_weights: share the output projection with the token embedding (then initialised
            N(0, 0.02²), so that the first loss is near ln(vocab_size)).
    """

    def __init__(self, config: TransformerConfig, tie_weights: bool = True) -> None:
        super().__init__()
        if not config.causal:
            raise ValueError("CausalLM needs TransformerConfig(causal=True)")
        if config.vocab_size is None:
            raise ValueError("CausalLM needs TransformerConfig(vocab_size=...)")
        self.config = config
        self.transformer = Transformer(config)
        self.lm_head = nn.Linear(config.dim, config.vocab_size, bias=False)
        if tie_weights:
            # GPT's N(0, 0.02²) for the shared table: at nn.Embedding's N(0, 1) the tied output
            # starts with logits of std ~sqrt(D) and a loss ~10× ln(vocab_size).
            nn.init.normal_(self.transformer.embed.tokens.weight, std=0.02)
            self.lm_head.weight = self.transformer.embed.tokens.weight

    def pretrained_arguments(self) -> dict[str, bool]:
        return {"tie_weights": self.lm_head.weight is self.transformer.embed.tokens.weight}

    def new_cache(self, bucket: int | None = None) -> DecodingCache:
        """An empty decoding cache, whose buffers grow by ``bucket`` positions
        (:data:`~filterformer.attention.CACHE_BUCKET` when None)."""
        return self.transformer.new_cache(bucket)

    def forward(
        self,
        input_ids: Tensor,
        *,
        padding_mask: Tensor | None = None,
        labels: Tensor | None = None,
        cache: DecodingCache | None = None,
        output_hidden_states: bool = False,
    ) -> CausalLMOutput:
        """Next-token logits.

        Args:
            input_ids: ``(B, N)``: the new positions when decoding with ``cache``.
            padding_mask: ``(B, N)`` (``(B, past + N)`` with a cache), True at real tokens.
            labels: ``(B, N)`` next-token targets aligned with ``input_ids`` (already shifted),
                -100 where ignored.
            cache: a decoding cache, updated in place.
            output_hidden_states: return every layer's output.
        """
        out = self.transformer(
            input_ids, padding_mask=padding_mask, cache=cache,
            output_hidden_states=output_hidden_states,
        )
        logits = self.lm_head(out.last_hidden_state)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
            if out.aux_loss is not None:
                loss = loss + out.aux_loss
        return CausalLMOutput(
            logits=logits, loss=loss, aux_loss=out.aux_loss, cache=out.cache,
            hidden_states=out.hidden_states,
        )

    @torch.no_grad()
    def generate(
        self,
        input_ids: Tensor,
        max_new_tokens: int,
        *,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_k: int | None = None,
        use_cache: bool = True,
        generator: torch.Generator | None = None,
        cache_bucket: int | None = None,
    ) -> Tensor:
        """Continue ``input_ids`` ``(B, T)`` by ``max_new_tokens`` tokens -> ``(B, T + new)``.

        Greedy unless ``do_sample`` (there is no beam search); ``use_cache=False`` recomputes the
        whole prefix every step (same result, for checking).

        Args:
            input_ids: ``(B, T)`` prompt token ids, ``T >= 1``.
            max_new_tokens: tokens to add (an integer >= 0).
            do_sample: sample from ``softmax(logits / temperature)`` instead of taking the argmax.
            temperature: a finite number > 0 (used when sampling).
            top_k: when sampling, keep only the ``top_k`` most likely tokens; 0 or None keeps
                them all (Hugging Face's meaning), and values above the vocabulary keep them all.
            use_cache: decode with a key/value cache.
            generator: the random generator of the sampling.
            cache_bucket: positions by which the cache's buffers grow (the past is copied once
                per bucket); :data:`~filterformer.attention.CACHE_BUCKET` when None.

        Raises:
            ValueError: for a negative or non-integer ``max_new_tokens`` or ``top_k``, or a
                ``temperature`` that is not a finite number > 0 when sampling.
        """
        check_integer("max_new_tokens", max_new_tokens, minimum=0)
        check_integer("top_k", top_k, minimum=0, optional=True,
                      hint=" (0 keeps every token)")
        if do_sample and (
            isinstance(temperature, bool)
            or not isinstance(temperature, (int, float))
            or not math.isfinite(temperature)
            or temperature <= 0
        ):
            raise ValueError(
                f"temperature must be a finite number > 0 when sampling; got {temperature!r}"
            )
        # Outside inference mode, autocast casts each weight once per generation instead of
        # once per token (it keeps no casts of inference-mode tensors).
        with torch.inference_mode(False), torch.no_grad():
            cache = self.new_cache(cache_bucket) if use_cache else None
            tokens, step_input = input_ids, input_ids
            for step in range(max_new_tokens):
                # The prompt's ids are checked; the later ones are the model's own choices.
                with ids_chosen_by_the_model() if step else nullcontext():
                    logits = self(step_input, cache=cache).logits[:, -1]
                next_token = self._choose(logits, do_sample, temperature, top_k, generator)
                tokens = torch.cat([tokens, next_token], dim=1)
                step_input = next_token if use_cache else tokens
        return tokens

    @staticmethod
    def _choose(
        logits: Tensor,
        do_sample: bool,
        temperature: float,
        top_k: int | None,
        generator: torch.Generator | None,
    ) -> Tensor:
        if not do_sample:
            return logits.argmax(dim=-1, keepdim=True)
        logits = logits / temperature
        if top_k:  # 0 and None keep every token
            kth = logits.topk(min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        return torch.multinomial(logits.softmax(dim=-1), 1, generator=generator)
