"""SAMSA: sampling self-attention (SAMSA: Efficient Transformer for Many Data Modalities).

METHODS.md §4.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..checks import check_choice, check_integer
from ..functional import (
    SAMPLING_MODES,
    CandidateRows,
    add_rms_normed,
    attend,
    attention_matrix,
    differentiable_topk,
    gather_rows,
    gumbel_noise,
    sampling_mixture,
    topk_gather,
    topk_split,
)
from ..functional.samsa_triton import (
    SAMSA_TRITON_MAX_HEAD_DIM,
    samsa_candidate_scores,
    samsa_gathered_candidates,
    samsa_sampled_attention,
    samsa_scores_triton_applies,
    samsa_triton_applies,
)
from ..functional.samsa_triton import SWITCH as SAMSA_KERNELS
from ..functional.triton_support import KERNEL_DTYPES
from ..optim import exclude_from_weight_decay
from .base import AttentionBase, AttentionInputs, autocast_dtype, autocast_input
from .context import AttentionMaps
from .registry import register_attention

__all__ = ["ImportanceScore", "SamplingAttention", "importance_scores"]

#: indices ``(B, h, m)`` -> the tokens' keys and values side by side ``(B, h, m, 2d)``.
TokenRows = Callable[[Tensor], Tensor]


class ImportanceScore(nn.Module):
    """Per-head importance of each token: ``Linear_{D→h}(x + RMSNorm(Linear(GELU(Linear(x)))))``.

    Args:
        dim: model width D.
        num_heads: h, one score per head.
        hidden_dim: the MLP's hidden width (D when None).
    """

    def __init__(self, dim: int, num_heads: int, hidden_dim: int | None = None) -> None:
        super().__init__()
        hidden_dim = dim if hidden_dim is None else hidden_dim
        self.mlp = nn.Sequential(nn.Linear(dim, hidden_dim), nn.GELU(), nn.Linear(hidden_dim, dim))
        self.norm = nn.RMSNorm(dim)
        self.head = nn.Linear(dim, num_heads)

    def forward(self, x: Tensor) -> Tensor:
        """``(B, N, D)`` residual stream -> ``(B, h, N)`` scores."""
        x = autocast_input(x)
        return self.scores(x, self.mlp(x))

    def scores(self, x: Tensor, hidden: Tensor) -> Tensor:
        """``(B, h, N)`` scores from the residual stream ``x`` (as the MLP read it) and the MLP's
        output ``hidden``, both ``(B, N, D)``."""
        return importance_scores(x, hidden, self.norm.weight, self.norm.eps, self.head.weight,
                                 self.head.bias)


def importance_scores(x: Tensor, hidden: Tensor, norm_weight: Tensor, eps: float | None,
                      head_weight: Tensor, head_bias: Tensor | None) -> Tensor:
    """:meth:`ImportanceScore.scores` with the norm's and the head's parameters given:
    ``(B, N, D)`` twice -> ``(B, h, N)``."""
    # Under autocast the MLP's output is half precision; it is normalised in the weight's
    # dtype, and the sum comes out in the half precision the head reads it in.
    residual = add_rms_normed(x, hidden, norm_weight, eps, autocast_dtype(x))
    return F.linear(residual, head_weight, head_bias).transpose(1, 2)


@register_attention("samsa")
class SamplingAttention(AttentionBase):
    """Each head attends from all N queries to its own k sampled key/value tokens: ``O(N·k·d)``.

    Importance scores come from the un-normed residual stream (``inputs.residual``); 2k learnable
    support tokens per head (keys, values and scores) join the candidates, so sampling works for
    any N, N < k included, and padded tokens (scored with the dtype's minimum) are never sampled.
    While training, Gumbel noise is added once per token and head and the sample is
    differentiable (see :func:`~filterformer.functional.differentiable_topk`); evaluation is
    deterministic unless ``eval_noise``. In evaluation the hard mode is one top-k and a gather
    (on CUDA without gradients, one Triton kernel that attends to the chosen rows where they
    live: :func:`~filterformer.functional.samsa_triton.samsa_sampled_attention`); the soft mode
    keeps the mixture. Non-causal only; masks only keys: a
    ``padding_mask``, or an ``attn_mask`` of shape ``(B, 1, 1, N)``.

    Args:
        dim: model width D.
        num_heads: heads h; D must be divisible by h.
        qkv_bias: bias on the fused q/k/v projection.
        attn_drop: dropout on the attention probabilities over the sampled tokens.
        proj_drop: dropout after the output projection.
        causal: must be False (SAMSA is non-causal only).
        neutreno_lambda: NeuTRENO's λ (METHODS.md §2); 0 disables the term.
        neutreno_learnable: learn a per-head λ initialised to ``neutreno_lambda``.
        num_samples: k, the tokens each head samples.
        mode: ``"soft"`` (mixture of chosen and runner-up tokens) or ``"hard"`` (exact top k
            forward, straight-through gradient to the scores).
        temperature: τ of the Gumbel sigmoid.
        eval_noise: keep the Gumbel noise in evaluation (as the authors' released code does).
        score_hidden_dim: hidden width of the importance-score MLP (D when None).
    """

    supports_causal = False
    key_padding_only = True
    options = (
        "num_samples", "mode", "temperature", "eval_noise", "score_hidden_dim",
        *AttentionBase.options,
    )

    def __init__(
        self,
        dim: int,
        num_heads: int = 8,
        qkv_bias: bool = False,
        attn_drop: float = 0.0,
        proj_drop: float = 0.0,
        *,
        causal: bool = False,
        neutreno_lambda: float = 0.0,
        neutreno_learnable: bool = False,
        num_samples: int = 32,
        mode: str = "soft",
        temperature: float = 1.0,
        eval_noise: bool = False,
        score_hidden_dim: int | None = None,
    ) -> None:
        check_integer("num_samples", num_samples)
        check_integer("score_hidden_dim", score_hidden_dim, optional=True)
        check_choice("mode", mode, SAMPLING_MODES)
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0; got {temperature}")
        super().__init__(
            dim, num_heads, qkv_bias, attn_drop, proj_drop, causal=causal,
            neutreno_lambda=neutreno_lambda, neutreno_learnable=neutreno_learnable,
        )
        self.num_samples = num_samples
        self.mode = mode
        self.temperature = float(temperature)
        self.eval_noise = eval_noise
        self.importance = ImportanceScore(dim, num_heads, score_hidden_dim)
        # Each support token's key then its value, side by side as the candidates' rows are: laid
        # out once, so no call concatenates them (support_keys and support_values are views).
        self.support_rows = nn.Parameter(
            torch.randn(num_heads, 2 * num_samples, 2 * self.head_dim) * 0.02
        )
        # Distinct scores: tied supports would be chosen by position, which padding shifts.
        self.support_scores = exclude_from_weight_decay(
            nn.Parameter(torch.randn(num_heads, 2 * num_samples) * 0.02)
        )

    @property
    def support_keys(self) -> Tensor:
        """``(h, 2k, d)`` the support tokens' keys: a view of ``support_rows`` ``(h, 2k, 2d)``."""
        return self.support_rows[..., : self.head_dim]

    @property
    def support_values(self) -> Tensor:
        """``(h, 2k, d)`` the support tokens' values: a view of ``support_rows``."""
        return self.support_rows[..., self.head_dim :]

    def _save_to_state_dict(self, destination, prefix, keep_vars) -> None:
        # Weight files hold the supports as two tensors, support_keys and support_values, each
        # contiguous (a file format may not share storage between tensors).
        super()._save_to_state_dict(destination, prefix, keep_vars)
        rows = destination.pop(prefix + "support_rows")
        destination[prefix + "support_keys"] = rows[..., : self.head_dim].contiguous()
        destination[prefix + "support_values"] = rows[..., self.head_dim :].contiguous()

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        # The two tensors of a weight file are laid side by side again; halves of mismatched
        # shapes are left for the load to report.
        names = (prefix + "support_keys", prefix + "support_values")
        keys, values = (state_dict.get(name) for name in names)
        if (keys is not None and values is not None and prefix + "support_rows" not in state_dict
                and keys.shape[:-1] == values.shape[:-1]):
            for name in names:
                del state_dict[name]
            state_dict[prefix + "support_rows"] = torch.cat([keys, values], dim=-1)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def candidate_scores(self, inputs: AttentionInputs, *, noise: bool) -> Tensor:
        """Scores of the N tokens then the 2k support tokens, ``(B, h, N + 2k)``, ≥ float32.

        Gumbel noise (when ``noise``) goes on the tokens' scores only; padded tokens get the
        dtype's minimum afterwards, so no noise can lift them. On CUDA one Triton kernel forms
        them after the score MLP, and one more their gradients
        (:func:`~filterformer.functional.samsa_triton.samsa_candidate_scores`, in float32).
        """
        x = autocast_input(inputs.residual)
        hidden = self.importance.mlp(x)
        norm, head = self.importance.norm, self.importance.head
        if samsa_scores_triton_applies(x, self.support_scores, hidden, norm.weight, head.weight,
                                       head.bias, padding_mask=inputs.padding_mask):
            # Drawn once, in float32 (the kernel's precision), for whichever path serves, laid
            # out as the eager path's (the head's output transposed): the same draws land on
            # the same tokens.
            gumbel = gumbel_noise(x.new_empty(x.shape[0], x.shape[1], self.num_heads)
                                  .transpose(1, 2), dtype=torch.float32) if noise else None

            def eager(x, hidden, norm_weight, head_weight, head_bias, support_scores) -> Tensor:
                scores = importance_scores(x, hidden, norm_weight, norm.eps, head_weight,
                                           head_bias)
                return self._candidate_scores(scores, inputs.padding_mask, gumbel,
                                              support_scores)

            return SAMSA_KERNELS.run(
                lambda: samsa_candidate_scores(
                    x, hidden, norm.weight, norm.eps, head.weight, head.bias,
                    self.support_scores, inputs.padding_mask, noise=gumbel, eager=eager,
                ),
                lambda: eager(x, hidden, norm.weight, head.weight, head.bias,
                              self.support_scores),
            )
        scores = self.importance.scores(x, hidden)
        # Gumbel noise and sigmoid comparisons of close scores need more than half precision:
        # the noise is drawn in float32 at least and its sum widens the scores, with no cast.
        gumbel = gumbel_noise(scores, dtype=torch.promote_types(scores.dtype, torch.float32)
                              ) if noise else None
        return self._candidate_scores(scores, inputs.padding_mask, gumbel)

    def _candidate_scores(self, scores: Tensor, padding_mask: Tensor | None,
                          gumbel: Tensor | None, support_scores: Tensor | None = None) -> Tensor:
        """:meth:`candidate_scores` from the tokens' scores ``(B, h, N)`` and their noise
        (``gumbel``, at least float32, or None), with ``support_scores`` (this layer's when
        None)."""
        if gumbel is None:
            scores = scores.to(torch.promote_types(scores.dtype, torch.float32))
        else:
            scores = scores + gumbel  # the noise's dtype is at least float32: the sum's too
        if padding_mask is not None:
            lowest = torch.finfo(scores.dtype).min
            scores = scores.masked_fill(~padding_mask[:, None, :], lowest)
        support_scores = self.support_scores if support_scores is None else support_scores
        support = support_scores.to(scores.dtype).expand(scores.shape[0], -1, -1)
        return torch.cat([scores, support], dim=-1)

    def projects_own_rows(self, x: Tensor, kernels_allowed: bool | None = None) -> bool:
        """Project only the sampled tokens' keys and values (``O(m·D²)`` for m rows a head in
        place of ``O(N·D²)``) where the rows gathered from ``x`` ``(B, N, D)``, m for each of h
        heads (k in hard evaluation, 2k otherwise), are no more than its N; not in hard
        evaluation where the Triton kernel runs (CUDA), which reads every token's rows where
        they live. ``kernels_allowed``: whether SAMSA's kernels may serve ``x`` (None: as they
        decide; True gives the choice made on CUDA)."""
        hard_eval = self.mode == "hard" and not self.training
        rows = self.num_samples * (1 if hard_eval else 2)
        if kernels_allowed is None:
            kernels_allowed = SAMSA_KERNELS.allows(x)
        kernel = hard_eval and self.head_dim <= SAMSA_TRITON_MAX_HEAD_DIM and kernels_allowed
        return self.num_heads * rows <= x.shape[1] and not kernel

    def _projected_rows(self, x: Tensor) -> TokenRows:
        """Keys and values side by side ``(B, h, m, 2d)`` of the tokens at indices ``(B, h, m)``,
        each row projected from ``x`` ``(B, N, D)`` by its head's slice of ``qkv`` once chosen:
        what gathering the rows of :meth:`project_qkv`'s k and v gives."""
        h, d, dim = self.num_heads, self.head_dim, self.dim
        weight = self.qkv.weight[dim:].view(2, h, d, dim).transpose(0, 1).reshape(h, 2 * d, dim)
        bias = self.qkv.bias
        if bias is not None:
            bias = bias[dim:].view(2, h, d).transpose(0, 1).reshape(h, 1, 2 * d)

        batch, length = x.shape[:2]
        flat_x = x.reshape(batch * length, dim)

        def rows(index: Tensor) -> Tensor:
            # Rows of the flattened x: the backward adds into an x-sized gradient, where a gather
            # from x expanded over the heads would fill an h times larger one.
            offsets = torch.arange(batch, device=index.device).view(batch, 1, 1) * length
            picked = flat_x.index_select(0, (index + offsets).flatten()).view(*index.shape, dim)
            out = picked @ weight.mT  # under autocast both in its dtype, as in the qkv Linear
            return out if bias is None else out + bias.to(out.dtype)

        return rows

    @staticmethod
    def _gathered_rows(k: Tensor, v: Tensor) -> TokenRows:
        """Keys and values side by side ``(B, h, m, 2d)`` gathered from every token's k and v."""
        return lambda index: torch.cat([gather_rows(k, index), gather_rows(v, index)], dim=-1)

    def _candidate_rows(self, tokens: TokenRows, length: int, like: Tensor,
                        support_rows: Tensor | None = None) -> CandidateRows:
        """The candidates, tokens then supports, as a function of indices ``(B, h, m)`` ->
        keys and values side by side ``(B, h, m, 2d)``: each row is gathered from where it lives
        (the ``length`` tokens' rows by ``tokens``, or the support tokens (``support_rows``,
        this layer's when None), cast to ``like``'s dtype), so no ``(B, h, N + 2k, 2d)`` copy is
        made."""
        support_rows = self.support_rows if support_rows is None else support_rows
        support = support_rows.to(like.dtype).expand(like.shape[0], -1, -1, -1)

        def rows(index: Tensor) -> Tensor:
            supports = gather_rows(support, (index - length).clamp(min=0))
            if length == 0:  # no tokens (N = 0): every candidate is a support token
                return supports
            token_rows = tokens(index.clamp(max=length - 1))
            return torch.where((index < length).unsqueeze(-1), token_rows, supports)

        return rows

    def _gathered_candidates(self, q: Tensor, k: Tensor, v: Tensor) -> CandidateRows:
        """The candidates from every token's keys ``k`` and values ``v`` ``(B, h, N, d)`` and the
        supports: on CUDA one Triton launch gathers them and one scatters their gradient back
        (:func:`~filterformer.functional.samsa_triton.samsa_gathered_candidates`), elsewhere
        (and after a kernel failure) torch operations do."""
        length = k.shape[-2]

        def eager(keys: Tensor, values: Tensor, support_rows: Tensor, index: Tensor) -> Tensor:
            tokens = self._gathered_rows(keys, values)
            return self._candidate_rows(tokens, length, q, support_rows)(index)

        if length == 0 or not (SAMSA_KERNELS.allows(q) and k.dtype in KERNEL_DTYPES
                               and v.dtype in KERNEL_DTYPES):
            return partial(eager, k, v, self.support_rows)

        def rows(index: Tensor) -> Tensor:
            return SAMSA_KERNELS.run(
                lambda: samsa_gathered_candidates(k, v, self.support_rows, index, q.dtype, eager),
                lambda: eager(k, v, self.support_rows, index),
            )

        return rows

    def attend(
        self, q: Tensor, k: Tensor | None, v: Tensor | None, inputs: AttentionInputs
    ) -> Tensor:
        scores = self.candidate_scores(inputs, noise=self.training or self.eval_noise)
        if k is None:  # only the sampled tokens' keys and values are projected
            tokens = self._projected_rows(inputs.x)
            return self._attend_sampled(
                q, self._candidate_rows(tokens, inputs.x.shape[-2], q), scores)

        def gathered() -> Tensor:  # the path without the evaluation kernel, and its fallback
            return self._attend_sampled(q, self._gathered_candidates(q, k, v), scores)

        if self.mode == "hard" and not self.training and k.shape[-2] > 0 and samsa_triton_applies(
                q, k, v, scores, self.support_rows):
            # Attention to a set of candidates: their order is free, and unsorted spares CUDA's
            # top-k the sort of the k it found.
            index = scores.topk(self.num_samples, dim=-1, sorted=False).indices
            return SAMSA_KERNELS.run(
                lambda: samsa_sampled_attention(
                    q, k, v, self.support_keys, self.support_values, index, self.scale,
                ),
                gathered,
            )
        return gathered()

    def _attend_sampled(self, q: Tensor, candidates: CandidateRows, scores: Tensor) -> Tensor:
        """Attention to the k candidates sampled by ``scores`` ``(B, h, N + 2k)`` (the path
        without the evaluation kernel)."""
        if self.mode == "hard" and not self.training:
            sampled = topk_gather(scores, candidates, self.num_samples)
        else:
            sampled = differentiable_topk(
                scores, candidates, self.num_samples, mode=self.mode,
                temperature=self.temperature,
            )
        keys, values = sampled.split(self.head_dim, dim=-1)
        return attend(
            q, keys, values, dropout_p=self.attn_drop if self.training else 0.0, scale=self.scale
        )

    def selection_matrix(self, scores: Tensor) -> Tensor:
        """How each sampled vector mixes the candidates: ``(B, h, k, N + 2k)``.

        Row m is one-hot at the m-th highest score in the hard mode; in the soft mode it puts
        ``mean_v P[m, v]`` on that token and ``(1 − P[m, v]) / k`` on each runner-up v.
        """
        top, bot = topk_split(scores, self.num_samples)
        selection = scores.new_zeros(*scores.shape[:-1], self.num_samples, scores.shape[-1])
        if self.mode == "hard":
            return selection.scatter(-1, top.unsqueeze(-1), 1.0)
        keep, mix = sampling_mixture(
            scores.gather(-1, top), scores.gather(-1, bot), self.temperature
        )
        selection = selection.scatter(-1, top.unsqueeze(-1), keep.unsqueeze(-1))
        index = bot.unsqueeze(-2).expand_as(mix)
        return selection.scatter_add(-1, index, mix)

    def filter_matrix(self, q: Tensor, k: Tensor, inputs: AttentionInputs) -> AttentionMaps:
        """The operator the layer applies to the tokens' values, ``(B, h, N, N)`` (small N only).

        Attention to the sampled vectors times their selection matrix, with the support tokens'
        columns left out (so rows sum to at most 1). Drawn without Gumbel noise unless
        ``eval_noise``; in evaluation this is exactly the forward's operator.
        """
        scores = self.candidate_scores(inputs, noise=self.eval_noise)
        selection = self.selection_matrix(scores)
        support_keys = self.support_keys.expand(k.shape[0], -1, -1, -1)
        keys = selection @ torch.cat([k, support_keys.to(k.dtype)], dim=-2).to(selection)
        weights = attention_matrix(q.to(keys), keys, scale=self.scale) @ selection
        operator = weights[..., : k.shape[-2]]
        return AttentionMaps(attention=operator, filter=operator)

    def extra_repr(self) -> str:
        return (
            f"{super().extra_repr()}, num_samples={self.num_samples}, mode={self.mode!r}, "
            f"temperature={self.temperature}, eval_noise={self.eval_noise}"
        )
