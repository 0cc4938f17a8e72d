import inspect

import pytest
import torch

from filterformer.attention import (
    AttentionBase,
    AttentionContext,
    SoftmaxAttention,
    attention_names,
    attention_options,
    build_attention,
    get_attention_class,
)

DIM, HEADS = 16, 2


def test_timm_compatible_names_and_signature():
    module = SoftmaxAttention(DIM, HEADS, qkv_bias=True, attn_drop=0.1, proj_drop=0.1)
    assert set(module.state_dict()) == {"qkv.weight", "qkv.bias", "proj.weight", "proj.bias"}
    x = torch.randn(2, 5, DIM)
    module.eval()
    mask = torch.ones(5, 5, dtype=torch.bool).tril()
    # timm's Block passes the mask as the second argument.
    torch.testing.assert_close(module(x, mask), SoftmaxAttention.forward(module, x, attn_mask=mask))


def test_neutreno_first_layer_sets_v0_and_later_layers_use_it():
    first = SoftmaxAttention(DIM, HEADS, neutreno_lambda=0.7).double()
    second = SoftmaxAttention(DIM, HEADS, neutreno_lambda=0.7).double()
    plain = SoftmaxAttention(DIM, HEADS).double()
    plain.load_state_dict(second.state_dict())
    x0, x1 = (torch.randn(2, 5, DIM, dtype=torch.float64) for _ in range(2))
    context = AttentionContext()
    first(x0, context=context)
    v0 = first.project_qkv(x0)[2]
    torch.testing.assert_close(context.first_values, v0)
    out = second(x1, context=context)
    v1 = second.project_qkv(x1)[2]
    correction = 0.7 * (v0 - v1)
    merged = correction.transpose(1, 2).reshape(2, 5, DIM)
    torch.testing.assert_close(out, plain(x1) + merged @ second.proj.weight.T)


def test_learnable_neutreno_lambda_is_a_per_head_parameter():
    module = SoftmaxAttention(DIM, HEADS, neutreno_lambda=0.4, neutreno_learnable=True)
    assert module.neutreno_lambda.shape == (HEADS,)
    context = AttentionContext(first_values=torch.randn(1, HEADS, 3, DIM // HEADS))
    module(torch.randn(1, 3, DIM), context=context).sum().backward()
    assert module.neutreno_lambda.grad.abs().sum() > 0


def test_context_aux_loss_averages_per_name_then_weights():
    context = AttentionContext()
    context.add_aux_loss("a", torch.tensor(1.0), 0.5)
    context.add_aux_loss("a", torch.tensor(3.0), 0.5)
    context.add_aux_loss("b", torch.tensor(4.0), 2.0)
    assert context.aux_loss().item() == pytest.approx(0.5 * 2.0 + 2.0 * 4.0)
    with pytest.raises(ValueError, match="weights"):
        context.add_aux_loss("a", torch.tensor(1.0), 0.1)
    assert AttentionContext().aux_loss() is None


def test_registry_errors_name_valid_choices():
    with pytest.raises(ValueError, match=r"unknown attention 'nope'; valid choices: .*softmax"):
        build_attention("nope", DIM, HEADS)
    assert {"softmax", "gfsa"} <= set(attention_names())
    with pytest.raises(ValueError, match="divisible"):
        build_attention("softmax", 10, 3)


#: timm's ``Attention(dim, num_heads, qkv_bias, attn_drop, proj_drop)``, taken by position too.
TIMM_POSITIONAL = ("dim", "num_heads", "qkv_bias", "attn_drop", "proj_drop")


@pytest.mark.parametrize("name", attention_names())
def test_declared_options_are_the_constructors_keyword_parameters(name):
    cls = get_attention_class(name)
    params = dict(inspect.signature(cls.__init__).parameters)
    params.pop("self")
    kinds = {p.kind for p in params.values()}
    assert not kinds & {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD}
    positional = [n for n, p in params.items() if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert tuple(positional) == TIMM_POSITIONAL
    assert all(p.kind is p.KEYWORD_ONLY for n, p in params.items() if n not in positional)
    options = attention_options(cls)
    assert len(set(options)) == len(options)
    assert set(options) == set(params) - {"dim", "num_heads"}
    base = inspect.signature(AttentionBase.__init__).parameters
    for option in AttentionBase.options:
        assert (params[option].kind, params[option].default) == (
            base[option].kind, base[option].default
        ), option
    # The method's own options come first, so error messages lead with them.
    assert options[len(options) - len(AttentionBase.options):] == AttentionBase.options


def test_unknown_option_lists_the_methods_options_first():
    with pytest.raises(ValueError) as error:
        build_attention("gfsa", DIM, HEADS, order=3)
    assert str(error.value) == (
        "unknown option(s) 'order' for attention 'gfsa'; valid options: K, learn, exact_power, "
        "base, qkv_bias, attn_drop, proj_drop, causal, neutreno_lambda, neutreno_learnable"
    )


def test_forward_rejects_bad_input():
    module = SoftmaxAttention(DIM, HEADS)
    with pytest.raises(ValueError, match=r"x must have shape \(B, N, 16\)"):
        module(torch.randn(5, DIM))
    with pytest.raises(ValueError, match="padding mask must have shape"):
        module(torch.randn(2, 5, DIM), padding_mask=torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(ValueError, match="causal"):
        from filterformer.attention import LayerCache

        module(torch.randn(2, 5, DIM), cache=LayerCache())


@pytest.mark.parametrize("name", attention_names())
@pytest.mark.parametrize("lam", [float("nan"), float("inf"), -0.5])
@pytest.mark.parametrize("learnable", [False, True])
def test_every_method_refuses_a_non_finite_or_negative_neutreno_lambda(name, lam, learnable):
    with pytest.raises(ValueError, match=r"neutreno_lambda must be a finite number >= 0"):
        build_attention(name, DIM, HEADS, neutreno_lambda=lam, neutreno_learnable=learnable)


def test_config_module_and_patch_refuse_a_bad_lambda_with_one_message():
    from filterformer.method_spec import MethodSpec
    from filterformer.models import TransformerConfig

    lam = -float(torch.rand(()).item()) - 1e-3
    messages = []
    for entry in (
        lambda: TransformerConfig(neutreno_lambda=lam),
        lambda: SoftmaxAttention(DIM, HEADS, neutreno_lambda=lam),
        lambda: MethodSpec.parse("neutreno", neutreno_lambda=lam),
    ):
        with pytest.raises(ValueError) as error:
            entry()
        messages.append(str(error.value))
    assert len(set(messages)) == 1 and repr(lam) in messages[0]


@pytest.mark.parametrize(
    ("dim", "num_heads", "needle"),
    [
        (0, 1, "dim must be a positive integer"),
        (-4, 2, "dim must be a positive integer"),
        (8.0, 2, "dim must be a positive integer"),
        (8, 2.0, "num_heads must be a positive integer"),
        (8, 0, "num_heads must be a positive integer"),
        (8, True, "num_heads must be a positive integer"),
        (8, 3, r"dim \(8\) must be divisible by num_heads \(3\)"),
    ],
)
@pytest.mark.parametrize("name", ["softmax", "gfsa", "agf", "samsa"])
def test_constructor_names_a_bad_width_or_head_count(name, dim, num_heads, needle):
    with pytest.raises(ValueError, match=needle):
        build_attention(name, dim, num_heads)


@pytest.mark.parametrize("method", ["softmax", "gfsa", "agf", "samsa"])
def test_under_autocast_a_float32_input_is_cast_to_half_precision_once(method):
    """Every projection reading x (q/k/v, AGF's W_Σ, SAMSA's score network) reads one cast of
    it, where autocast alone would cast it once per projection."""
    from torch.utils._python_dispatch import TorchDispatchMode

    module = build_attention(method, DIM, HEADS).train(bool(torch.randint(0, 2, ())))
    x = torch.randn(2, int(torch.randint(5, 12, ())), DIM)

    class Casts(TorchDispatchMode):
        count = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if (func.overloadpacket is torch.ops.aten._to_copy and args[0] is x
                    and kwargs.get("dtype") == torch.bfloat16):
                Casts.count += 1
            return func(*args, **kwargs)

    with torch.autocast("cpu", torch.bfloat16), Casts():
        out = module(x)
    assert out.dtype == torch.bfloat16 and torch.isfinite(out).all()
    assert Casts.count == 1
