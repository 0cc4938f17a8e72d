"""The timm family: one adapter that creates a ViT, finds its blocks, patches it, captures its
intermediates and describes and rebuilds a saved one, for patching, saving, diagnostics, training
and the CLI.

No timm weights ship offline: models are created with random weights (``pretrained=False``), and
every timm model the package builds is created here. A saved model's ``config.json`` is
:mod:`.timm_saved`'s.
Patching is :mod:`filterformer.patching.timm_vit`'s, capture
:mod:`filterformer.diagnostics.capture.timm`'s; both are imported on use, since they import
this package.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torch import Tensor, nn

from .timm_models import has_timm_blocks, is_timm_vision_transformer, vision_transformer_blocks
from .timm_saved import create_arguments, read_saved_config, saved_config

if TYPE_CHECKING:
    from ..diagnostics.capture.captured import CapturedForward
    from ..method_spec import MethodSpec
    from ..patching.state import PatchState

__all__ = ["SUPPORTED", "TIMM", "TimmFamily"]

#: The models :func:`filterformer.patch` takes from timm.
SUPPORTED = "timm VisionTransformer models (ViT, DeiT) whose blocks use timm's plain Attention"
#: What :meth:`TimmFamily.create` asks of a model: a VisionTransformer (``vit_only``: to patch or
#: train), or timm's block stack (to diagnose), each with the models that have it.
REQUIREMENTS = {
    True: ("a timm VisionTransformer", "a ViT or DeiT model"),
    False: ("a ViT-style timm model", "a model with ViT blocks (ViT, DeiT, Eva, BEiT, …)"),
}


class TimmFamily:
    """timm models with ViT blocks: VisionTransformers (ViT, DeiT) are patched; Eva, BEiT and
    other families with the same block stack are diagnosed too."""

    #: The family's name among :data:`filterformer.diagnostics.capture.MODEL_KINDS`.
    name = "timm"
    #: The library, as patch states, saved patches and pretrained run configs record it.
    backend = "timm"
    #: The models :meth:`patch` takes, for error messages.
    patchable = SUPPORTED
    #: timm models have no save of their own: filterformer writes timm's layout
    #: (:meth:`saved_config`) and :meth:`rebuild` reads it.
    saves_itself = False

    def create(self, name: str, *, vit_only: bool, **options: Any) -> nn.Module:
        """timm's model ``name`` with random weights and no classifier of its own.

        Args:
            name: a timm architecture, e.g. ``vit_tiny_patch16_224``.
            vit_only: require a ``VisionTransformer`` (to patch or fine-tune), else any model
                with timm's block stack (to diagnose).
            **options: passed to ``timm.create_model`` (``img_size``, ``patch_size``,
                ``in_chans``, …).

        Raises:
            MissingSourceError: when timm is missing.
            ValueError: for a name timm does not know, or a model that is not what ``vit_only``
                asks (callers put the argument's name in front).
        """
        timm = _library_knowing(name)
        kind, takes = REQUIREMENTS[vit_only]
        try:
            model = timm.create_model(name, pretrained=False, num_classes=0, **options)
        except TypeError as err:  # another architecture: no img_size or patch_size
            raise ValueError(f"{name} is not {kind} ({err}); it must be {takes}") from None
        accepted = is_timm_vision_transformer if vit_only else has_timm_blocks
        if not accepted(model):
            raise ValueError(f"{name} is not {kind} (it is a {type(model).__name__}); it must be "
                             f"{takes}")
        return model

    def saved_config(
        self, model: nn.Module, create_kwargs: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """The ``config.json`` that rebuilds ``model`` (:func:`~.timm_saved.saved_config`):
        its architecture and ``create_kwargs``, by default timm's record of them."""
        return saved_config(model, create_kwargs)

    def from_saved_config(self, config: Mapping[str, Any]) -> nn.Module:
        """The model a :meth:`saved_config` describes, with random weights (its classifier
        included): under ``torch.device("meta")``, to check the config without memory or time.

        Raises:
            MissingSourceError: when timm is missing.
            ValueError: for an architecture timm does not know, or arguments it does not take.
        """
        architecture = config["architecture"]
        timm = _library_knowing(architecture)
        kwargs = create_arguments(config)
        try:
            return timm.create_model(architecture, pretrained=False, **kwargs)
        except TypeError as err:
            raise ValueError(
                f"timm.create_model({architecture!r}, **{kwargs}) fails: {err}"
            ) from err

    def rebuild(self, directory: Path, model: str, *, named_in: Path) -> nn.Module:
        """The architecture ``model`` as ``directory``'s ``config.json`` creates it, without
        its weights (``named_in`` names ``model``, for errors).

        Raises:
            FileNotFoundError: when ``directory`` has no ``config.json``.
            ValueError: for a config that is malformed, names another architecture, or does not
                create a model (naming the file).
        """
        config = read_saved_config(directory, model, named_in=named_in)
        try:
            return self.from_saved_config(config)
        except ValueError as err:
            raise ValueError(f"{directory / 'config.json'}: {err}") from None

    def is_model(self, model: nn.Module) -> bool:
        """Whether ``model`` has timm's block stack (diagnostics can read it)."""
        return has_timm_blocks(model)

    def is_patchable(self, model: nn.Module) -> bool:
        """Whether ``model`` is a timm ``VisionTransformer``, which :meth:`patch` takes."""
        return is_timm_vision_transformer(model)

    def layers(self, model: nn.Module) -> list[nn.Module]:
        """The transformer blocks, in depth order (each with ``attn``, ``norm1``, …)."""
        return vision_transformer_blocks(model)

    def final_hidden_states(self, model: nn.Module, inputs: Any) -> Tensor:
        """The ``(B, N, D)`` final hidden states ``model.forward_features(inputs)``.

        Raises:
            ValueError: when ``inputs`` is not the ``(B, C, H, W)`` images as a tensor.
        """
        if not isinstance(inputs, Tensor):
            raise ValueError("inputs of a timm ViT must be its (B, C, H, W) images as a tensor; "
                             f"got {type(inputs).__name__}")
        return model.forward_features(inputs)

    def patch(self, model: nn.Module, spec: MethodSpec) -> PatchState:
        """Patch ``model`` in place (:func:`filterformer.patching.timm_vit.patch_timm`)."""
        from ..patching.timm_vit import patch_timm

        return patch_timm(model, spec)

    def unpatch(self, state: PatchState) -> None:
        """Undo :meth:`patch`: the original attention modules come back."""
        state.undo()

    def capture(
        self, model: nn.Module, batch: Any, *, attentions: bool = False, norms: bool = True
    ) -> CapturedForward:
        """One forward pass with its intermediates
        (:func:`filterformer.diagnostics.capture.timm.capture_timm`)."""
        from ..diagnostics.capture.timm import capture_timm

        return capture_timm(model, batch, attentions=attentions, norms=norms)


def _library_knowing(name: str) -> Any:
    """The ``timm`` module, once it is known to have a model ``name``.

    Raises:
        MissingSourceError: when timm is missing.
        ValueError: for a name timm does not know, naming some ViTs it does.
    """
    from ..data.sources import require_module

    require_module("timm", "timm")
    import timm

    if not timm.is_model(name):
        raise ValueError(f"timm has no model {name!r}; ViTs include "
                         f"{', '.join(timm.list_models('vit_tiny*')[:3])}, "
                         "deit_tiny_patch16_224")
    return timm


#: The adapter every part of the package goes through.
TIMM = TimmFamily()
