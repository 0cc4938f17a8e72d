"""Pure attention kernels: functions of tensors, no parameters.

Shapes follow :func:`torch.nn.functional.scaled_dot_product_attention`: q, k, v are
``(B, heads, N, head_dim)``.
"""

from .agf import (
    agf,
    agf_attend,
    agf_coefficients,
    agf_factors,
    agf_filter,
    agf_layer,
    agf_orthogonality,
    agf_response,
)
from .efficient import efficient_attention, efficient_feature_maps
from .gfsa import (
    GFSA_BASES,
    PastPowers,
    attention_powers,
    efficient_attention_powers,
    gfsa,
    gfsa_combine,
    gfsa_filter,
    gfsa_response,
)
from .masks import (
    MASKED_SCORE,
    causal_mask,
    check_key_padding_mask,
    check_qkv,
    key_padding_from_attn_mask,
    sdpa_mask,
)
from .neutreno import check_neutreno_lambda, neutreno
from .polynomials import (
    POLYNOMIAL_BASES,
    chebyshev_basis,
    jacobi_basis,
    legendre_basis,
    monomial_basis,
    polynomial_basis,
    polynomial_series,
)
from .sampling import (
    SAMPLING_MODES,
    CandidateRows,
    add_rms_normed,
    differentiable_topk,
    gather_rows,
    gumbel_noise,
    sampling_mixture,
    topk_gather,
    topk_split,
)
from .softmax import attend, attention_matrix, repeat_heads

__all__ = [
    "GFSA_BASES",
    "MASKED_SCORE",
    "POLYNOMIAL_BASES",
    "SAMPLING_MODES",
    "CandidateRows",
    "PastPowers",
    "add_rms_normed",
    "agf",
    "agf_attend",
    "agf_coefficients",
    "agf_factors",
    "agf_filter",
    "agf_layer",
    "agf_orthogonality",
    "agf_response",
    "attend",
    "attention_matrix",
    "attention_powers",
    "causal_mask",
    "chebyshev_basis",
    "check_key_padding_mask",
    "check_neutreno_lambda",
    "check_qkv",
    "differentiable_topk",
    "efficient_attention",
    "efficient_attention_powers",
    "efficient_feature_maps",
    "gather_rows",
    "gfsa",
    "gfsa_combine",
    "gfsa_filter",
    "gfsa_response",
    "gumbel_noise",
    "jacobi_basis",
    "key_padding_from_attn_mask",
    "legendre_basis",
    "monomial_basis",
    "neutreno",
    "polynomial_basis",
    "polynomial_series",
    "repeat_heads",
    "sampling_mixture",
    "sdpa_mask",
    "topk_gather",
    "topk_split",
]
