"""What every model family's adapter offers, and which adapter a model goes through.

Patching, diagnostics, training and the CLI ask here rather than test a model's class
themselves, so that each family's checks and error messages are written once.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from torch import Tensor, nn

from .huggingface import HUGGING_FACE
from .timm import TIMM

if TYPE_CHECKING:
    from ..diagnostics.capture.captured import CapturedForward
    from ..method_spec import MethodSpec
    from ..patching.state import PatchState

__all__ = ["FAMILIES", "LaidOutFamily", "ModelFamily", "family_named", "family_of",
           "patchable_family"]


class ModelFamily(Protocol):
    """A family's adapter (:data:`~.huggingface.HUGGING_FACE`, :data:`~.timm.TIMM`); each also
    loads or creates its models in its own terms.

    Attributes:
        name: the family's name among the diagnostics' model kinds.
        backend: the library, as patch states, saved patches and pretrained configs record it.
        patchable: the models :meth:`patch` takes, for error messages.
        saves_itself: whether the family's models save themselves (``model.save_pretrained``);
            else :func:`filterformer.save_pretrained` writes the family's layout.
    """

    name: str
    backend: str
    patchable: str
    saves_itself: bool

    def is_model(self, model: nn.Module) -> bool: ...

    def is_patchable(self, model: nn.Module) -> bool: ...

    def layers(self, model: nn.Module) -> list[nn.Module]: ...

    def final_hidden_states(self, model: nn.Module, inputs: Any) -> Tensor:
        """The ``(B, N, D)`` final hidden states of ``model`` on ``inputs`` (its keyword
        arguments, or its images); ValueError for inputs the family's models do not take."""
        ...

    def patch(self, model: nn.Module, spec: MethodSpec) -> PatchState: ...

    def unpatch(self, state: PatchState) -> None: ...

    def rebuild(self, directory: Path, model: str, *, named_in: Path) -> nn.Module:
        """The saved ``model`` (a class or architecture name, as ``named_in`` gives it) built
        from ``directory``'s config, without its weights."""
        ...

    def capture(
        self, model: nn.Module, batch: Any, *, attentions: bool = False, norms: bool = True
    ) -> CapturedForward: ...


class LaidOutFamily(ModelFamily, Protocol):
    """A family whose models do not save themselves (``saves_itself`` is False, timm):
    :func:`filterformer.save_pretrained` writes the ``config.json`` it describes them with."""

    def saved_config(
        self, model: nn.Module, create_kwargs: Mapping[str, Any] | None = None
    ) -> dict[str, Any]: ...

    def from_saved_config(self, config: Mapping[str, Any]) -> nn.Module: ...


#: Every family, in the order a model is matched against them.
FAMILIES: tuple[ModelFamily, ...] = (HUGGING_FACE, TIMM)


def family_of(model: nn.Module) -> ModelFamily | None:
    """The family ``model`` belongs to (diagnostics can read it), or None."""
    return next((family for family in FAMILIES if family.is_model(model)), None)


def patchable_family(model: nn.Module) -> ModelFamily:
    """The family whose :meth:`~ModelFamily.patch` takes ``model``.

    Raises:
        ValueError: naming the model's class and the models each family patches.
    """
    for family in FAMILIES:
        if family.is_patchable(model):
            return family
    raise ValueError(
        f"cannot patch a {type(model).__name__}; supported: "
        f"{' and '.join(family.patchable for family in FAMILIES)}"
    )


def family_named(backend: str) -> ModelFamily:
    """The family of a patch state's or a pretrained config's ``backend``.

    Raises:
        ValueError: for a backend no family has, naming the valid ones.
    """
    for family in FAMILIES:
        if family.backend == backend:
            return family
    raise ValueError(f"backend must be one of {tuple(f.backend for f in FAMILIES)}; got "
                     f"{backend!r}")
