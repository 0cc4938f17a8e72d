"""What a patch keeps on the model: the request, what it changed, and per-forward state.

Hooks and attention functions find the state through the module they run on (an attribute set on
every module that needs it), never through a closure, so a deep copy of a patched model carries
its own state and stays independent of the original.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor, nn
from torch.utils.hooks import RemovableHandle

from ..attention.context import AttentionContext
from ..attention.decoding_cache import LayerCache
from ..method_spec import MethodSpec
from ..optim import exclude_from_weight_decay

__all__ = [
    "STATE_ATTRIBUTE",
    "CachedPowers",
    "PatchContext",
    "PatchState",
    "PowerCache",
    "get_patch_state",
    "patched_parameters",
]

#: The attribute under which a patched model (and its hooked modules) hold the :class:`PatchState`.
STATE_ATTRIBUTE = "_filterformer_patch"


class PowerCache(LayerCache):
    """One GFSA layer's ``ĀV`` at every position decoded so far (signal ``"power1"``; with
    ``exact_power``, every ``Ā^n V`` up to ``n = K − 1``).

    ``Ā²V`` at a new position mixes the past positions' ``ĀV``, which causality makes final. It
    also keeps the first key/value head's key at every position, ``(B, 1, T, d)``, against which
    a decoding cache changed behind the patch's back is detected. Both live in the bucketed
    buffers of :class:`LayerCache`, written in place; the keys come from the model's own cache,
    whose length is exactly the positions held, so signals are returned over those alone.
    """

    @property
    def span(self) -> int:
        return self.length

    def append_key(self, key: Tensor) -> None:
        """Keep the first head of the new positions' keys ``(B, h, L, d)``."""
        if key.shape[-2]:
            self._advance(key.shape[-2])
            self._write("key", key[:, :1].detach())

    @property
    def last_key(self) -> Tensor:
        """The kept ``(B, 1, 1, d)`` key at the last position."""
        return self._buffers["key"][..., self.length - 1 : self.length, :]


class CachedPowers(dict[int, PowerCache]):
    """GFSA's :class:`PowerCache` of every layer, carried by a Hugging Face decoding cache.

    Its methods have the names and arguments of the cache's own operations, and the patch has the
    cache call them after each of those (``huggingface.FOLLOWED_OPERATIONS``), so that ``ĀV`` at
    past positions follows every reordering, batch selection and crop the cache undergoes (beam
    search, assisted decoding), as transformers' ``DynamicLayer`` applies it to keys and values.
    """

    def reorder_cache(self, beam_idx: Tensor) -> None:
        """Take batch rows ``beam_idx`` ``(B,)``, in that order (beam search)."""
        self._map(lambda t: t.index_select(0, beam_idx.to(t.device)))

    def batch_select_indices(self, indices: Tensor) -> None:
        """Keep the batch rows ``indices``."""
        self._map(lambda t: t[indices, ...])

    def batch_repeat_interleave(self, repeats: int) -> None:
        """Repeat every batch row ``repeats`` times in place (``B`` -> ``B·repeats``)."""
        self._map(lambda t: t.repeat_interleave(repeats, dim=0))

    def crop(self, tokens_to_remove: int) -> None:
        """Drop the last ``-tokens_to_remove`` positions (assisted decoding's rejected draft);
        a positive value is, as for transformers' legacy caches, the number of positions kept."""
        if tokens_to_remove != 0:
            for store in self.values():
                store.crop(len(range(store.length)[:tokens_to_remove]))

    def reset(self) -> None:
        """Forget every position (the cache starts again empty)."""
        self.clear()

    def _map(self, fn: Callable[[Tensor], Tensor]) -> None:
        for store in self.values():
            store.map_tensors(fn)


@dataclass
class PatchContext(AttentionContext):
    """One forward pass of a patched model.

    Attributes:
        calls: attention calls so far (the layer index where one module serves several layers).
        powers: per layer, GFSA's :class:`PowerCache` (carried by the model's decoding cache).
        layer_outputs: per layer index, that layer's ``(B, N, D)`` output (layer fusion).
        layer_calls: layer calls so far (the layer index where one module serves several layers).
        neutreno_scale: the 0-dimensional fraction of λ that NeuTRENO's warm-up gives this pass
            (:mod:`~filterformer.patching.neutreno_warmup`), or None for λ as it is.
    """

    calls: int = 0
    powers: CachedPowers = field(default_factory=CachedPowers)
    layer_outputs: dict[int, Tensor] = field(default_factory=dict)
    layer_calls: int = 0
    neutreno_scale: Tensor | None = None

    def neutreno(self, out: Tensor, values: Tensor, lam: float | Tensor | None) -> Tensor:
        """:meth:`AttentionContext.neutreno` with λ scaled by the warm-up, when there is one."""
        if self.neutreno_scale is not None and lam is not None:
            lam = lam * self.neutreno_scale
        return super().neutreno(out, values, lam)


class PatchState:
    """Everything :func:`~filterformer.patching.patch` changed, so that ``unpatch`` can undo it.

    Args:
        spec: the validated request.
        backend: ``"transformers"`` or ``"timm"``.
        model: the patched model.
        num_layers: the model's number of layers.
    """

    def __init__(
        self, spec: MethodSpec, backend: str, model: nn.Module, num_layers: int
    ) -> None:
        self.spec = spec
        self.backend = backend
        self.model = model
        self.num_layers = num_layers
        #: whether one module serves several layers (ALBERT), so that its calls are counted.
        self.shared_layers = False
        self.context = PatchContext()
        self.hooks: list[RemovableHandle] = []
        #: ``(owner module, attribute name)`` of every parameter the patch added.
        self.new_parameters: list[tuple[nn.Module, str]] = []
        #: ``(module, attribute name)`` of every attribute the patch set (removed by unpatch).
        self.attributes: list[tuple[nn.Module, str]] = []
        #: ``(parent module, attribute name, original module)`` of every replaced submodule.
        self.replaced: list[tuple[nn.Module, str, nn.Module | None]] = []
        #: whatever else a backend needs to restore (e.g. the attention implementation).
        self.restore: dict[str, Any] = {}
        #: the :class:`~filterformer.nn.LayerFusion` module when the method is ``"fusion"``.
        self.fusion: nn.Module | None = None
        #: the layer modules whose outputs are fused, in depth order.
        self.fusion_layers: list[nn.Module] = []
        #: the :class:`~filterformer.patching.neutreno_warmup.NeutrenoWarmup` that scales
        #: NeuTRENO's λ, when the patch has ``neutreno_warmup``.
        self.neutreno_warmup: nn.Module | None = None

    @property
    def needs_whole_forward(self) -> bool:
        """Whether layers share state within a forward pass (NeuTRENO's V⁰, fused outputs, a
        shared module's call count), which recomputing a single layer (gradient checkpointing)
        would corrupt."""
        return self.spec.uses_neutreno or self.spec.uses_fusion or self.shared_layers

    def start_forward(self, powers: CachedPowers | None = None) -> PatchContext:
        """Begin a forward pass; ``powers`` carries GFSA's cached signals across decoding steps."""
        scale = None if self.neutreno_warmup is None else self.neutreno_warmup.scale()
        self.context = PatchContext(
            powers=CachedPowers() if powers is None else powers, neutreno_scale=scale
        )
        return self.context

    def check_checkpointing(self, checkpointing: bool) -> None:
        """Refuse gradient checkpointing where it would silently break the method."""
        if checkpointing and self.needs_whole_forward:
            raise ValueError(
                f"method {self.spec.name!r} shares state between layers within a forward pass, "
                "which gradient checkpointing would recompute layer by layer; disable gradient "
                "checkpointing (it is supported with 'gfsa' on unshared layers)"
            )

    def attach(self, module: nn.Module) -> None:
        """Let hooks running on ``module`` find this state."""
        self.set_attribute(module, STATE_ATTRIBUTE, self)

    def set_attribute(self, module: nn.Module, name: str, value: Any) -> None:
        """Set ``module.<name>`` on the instance (removed by unpatch)."""
        setattr(module, name, value)
        self.attributes.append((module, name))

    def add_submodule(self, parent: nn.Module, name: str, module: nn.Module) -> None:
        """Register ``module`` as ``parent.<name>`` (replacing what was there, kept for undo)."""
        original = parent._modules.get(name)
        if original is None and hasattr(parent, name):
            raise ValueError(
                f"{type(parent).__name__} already has an attribute {name!r}; cannot patch it"
            )
        parent.add_module(name, module)
        self.replaced.append((parent, name, original))

    def add_parameters(self, module: nn.Module) -> None:
        """Record ``module``'s own parameters as new, and keep them out of weight decay."""
        for name, param in module.named_parameters(recurse=False):
            exclude_from_weight_decay(param)
            self.new_parameters.append((module, name))

    def add_hook(self, handle: RemovableHandle) -> None:
        self.hooks.append(handle)

    def undo(self) -> None:
        """Remove hooks, restore replaced modules and drop added attributes."""
        for handle in self.hooks:
            handle.remove()
        for parent, name, original in reversed(self.replaced):
            if original is None:
                delattr(parent, name)
            else:
                setattr(parent, name, original)
        for module, name in self.attributes:
            if name in module.__dict__:
                delattr(module, name)
        self.hooks, self.replaced, self.attributes = [], [], []


def get_patch_state(module: nn.Module) -> PatchState | None:
    """The :class:`PatchState` of a patched model (or of one of its hooked modules)."""
    return module.__dict__.get(STATE_ATTRIBUTE)


def patched_parameters(model: nn.Module) -> list[tuple[str, nn.Parameter]]:
    """The ``(name, parameter)`` pairs that :func:`~filterformer.patching.patch` added.

    GFSA's learned coefficients, layer-fusion weights, …: what an optimiser fine-tuning only the
    patch needs. Empty for a model that is not patched.
    """
    state = get_patch_state(model)
    if state is None:
        return []
    ids = {id(getattr(module, name)) for module, name in state.new_parameters}
    return [(name, param) for name, param in model.named_parameters() if id(param) in ids]
