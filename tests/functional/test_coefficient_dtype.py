import itertools
import random

import torch

from filterformer.functional.coefficient_dtype import as_terms_dtype, terms_dtype

DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def test_terms_dtype_is_the_promotion_of_every_terms_dtype():
    for dtypes in itertools.product(DTYPES, repeat=3):
        terms = [torch.randn(2, 3).to(dtype) for dtype in dtypes]
        expected = torch.promote_types(torch.promote_types(*dtypes[:2]), dtypes[2])
        assert terms_dtype(*terms) == expected
        assert terms_dtype(terms[0]) == dtypes[0]


def test_a_coefficient_is_cast_to_the_terms_dtype_and_kept_where_it_already_is():
    coefficient = torch.randn(random.randint(1, 6), requires_grad=True)
    assert as_terms_dtype(coefficient, torch.float32) is coefficient
    cast = as_terms_dtype(coefficient, torch.bfloat16)
    assert cast.dtype == torch.bfloat16 and torch.equal(cast, coefficient.bfloat16())
    cast.float().sum().backward()
    assert coefficient.grad.dtype == torch.float32 and torch.equal(
        coefficient.grad, torch.ones_like(coefficient))
