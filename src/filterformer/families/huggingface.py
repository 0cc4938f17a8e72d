"""The Hugging Face ``transformers`` family: one adapter that loads a model (or rebuilds a saved
one), finds its layers, patches it and captures its intermediates, for patching, saving,
diagnostics, training and the CLI.

Loading is offline and runs no code a directory ships (:mod:`.hf_directory`); patching is
:mod:`filterformer.patching.huggingface`'s, capture
:mod:`filterformer.diagnostics.capture.huggingface`'s. Both are imported on use: they import
this package, and ``import filterformer.families`` stays free of ``transformers``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torch import Tensor, nn

from .hf_directory import (
    build_saved_class,
    load_config,
    load_model,
    load_tokenizer,
    pretrained_directory,
    source_problem,
)
from .hf_modules import attention_modules, hidden_layers, is_huggingface_model

if TYPE_CHECKING:
    from ..diagnostics.capture.captured import CapturedForward
    from ..method_spec import MethodSpec
    from ..patching.state import PatchState

__all__ = ["HUGGING_FACE", "TESTED_MODELS", "HuggingFaceFamily"]

#: The models the patch is tested on (any model using the attention interface works).
TESTED_MODELS = "BERT, RoBERTa, ALBERT, GPT-2, ViT, Llama-style (grouped-query attention)"


class HuggingFaceFamily:
    """``transformers.PreTrainedModel``\\ s whose attention goes through the
    ``AttentionInterface``.

    A ``source`` is :data:`~.hf_directory.MINILM` or a local model directory.
    """

    #: The family's name among :data:`filterformer.diagnostics.capture.MODEL_KINDS`.
    name = "huggingface"
    #: The library, as patch states, saved patches and pretrained run configs record it.
    backend = "transformers"
    #: The models :meth:`patch` takes, for error messages.
    patchable = (f"Hugging Face transformers models ({TESTED_MODELS}, or any whose attention "
                 "goes through AttentionInterface)")
    #: The models save themselves (``model.save_pretrained``, which a patch extends to write the
    #: patch too), and :meth:`rebuild` reads what they write.
    saves_itself = True

    # -- loading ---------------------------------------------------------------------------------

    def directory(self, source: str) -> Path:
        """The model directory of ``source``."""
        return pretrained_directory(source)

    def source_problem(self, source: str) -> str | None:
        """What keeps ``source`` from naming a model directory; None when nothing does."""
        return source_problem(source)

    def config(self, source: str) -> Any:
        """The model's ``transformers`` config.

        Raises:
            MissingSourceError: when transformers (or the MiniLM package) is missing.
            ValueError: for a directory that ships code of its own (``auto_map``).
        """
        from ..data.sources import require_module

        require_module("transformers", "transformers")
        return load_config(self.directory(source))

    def tokenizer(self, source: str) -> Any:
        """The model directory's own tokenizer (raises as :meth:`config`)."""
        from ..data.sources import require_module

        require_module("transformers", "transformers")
        return load_tokenizer(self.directory(source))

    def load(self, source: str) -> nn.Module:
        """The base model (no task head) with its pretrained weights, in eval mode."""
        self.config(source)  # the clear message when transformers is missing
        with _quiet_loading():
            return load_model(self.directory(source)).eval()

    def from_config(self, source: str) -> nn.Module:
        """The base model built from its config alone, without weights: under
        ``torch.device("meta")``, to check a patch without memory or time."""
        from transformers import AutoModel

        return AutoModel.from_config(self.config(source), trust_remote_code=False)

    def rebuild(self, directory: Path, model: str, *, named_in: Path) -> nn.Module:
        """The class ``model`` (``"BertForSequenceClassification"``) as ``directory``'s saved
        config builds it, without its weights
        (:func:`~.hf_directory.build_saved_class`; ``named_in`` names ``model``, for errors)."""
        from ..data.sources import require_module

        require_module("transformers", "transformers")
        return build_saved_class(directory, model, named_in=named_in)

    # -- the model -------------------------------------------------------------------------------

    def is_model(self, model: nn.Module) -> bool:
        """Whether ``model`` belongs to the family (diagnostics can read it)."""
        return is_huggingface_model(model)

    def is_patchable(self, model: nn.Module) -> bool:
        """Whether :meth:`patch` is the route for ``model`` (it says when a model lacks the
        attention interface)."""
        return is_huggingface_model(model)

    def layers(self, model: nn.Module) -> list[nn.Module]:
        """The stack of ``config.num_hidden_layers`` layers (empty for ALBERT's shared one)."""
        return hidden_layers(model)

    def attention_modules(self, model: nn.Module) -> list[tuple[str, nn.Module]]:
        """The self-attention modules that use the interface, in depth order, by name."""
        return attention_modules(model)

    def final_hidden_states(self, model: nn.Module, inputs: Any) -> Tensor:
        """The ``(B, N, D)`` final hidden states of ``model(**inputs)``: its
        ``last_hidden_state``, or the last of its ``hidden_states`` where its output has no
        ``last_hidden_state`` (models with a task head).

        Raises:
            ValueError: when ``inputs`` is not a mapping of keyword arguments.
        """
        if not isinstance(inputs, Mapping):
            raise ValueError("inputs of a Hugging Face model must be its keyword arguments "
                             f"(input_ids, attention_mask, ...) as a mapping; got "
                             f"{type(inputs).__name__}")
        output = model(**inputs, output_hidden_states=True)
        last = getattr(output, "last_hidden_state", None)
        return last if last is not None else output.hidden_states[-1]

    def patch(self, model: nn.Module, spec: MethodSpec) -> PatchState:
        """Patch ``model`` in place
        (:func:`filterformer.patching.huggingface.patch_huggingface`)."""
        from ..patching.huggingface import patch_huggingface

        return patch_huggingface(model, spec)

    def unpatch(self, state: PatchState) -> None:
        """Undo :meth:`patch`: the attention implementation, then everything the patch added."""
        from ..patching.huggingface import unpatch_huggingface

        unpatch_huggingface(state)

    def capture(
        self, model: nn.Module, batch: Any, *, attentions: bool = False, norms: bool = True
    ) -> CapturedForward:
        """One forward pass with its intermediates
        (:func:`filterformer.diagnostics.capture.huggingface.capture_huggingface`)."""
        from ..diagnostics.capture.huggingface import capture_huggingface

        return capture_huggingface(model, batch, attentions=attentions, norms=norms)


@contextlib.contextmanager
def _quiet_loading() -> Iterator[None]:
    """Hide transformers' weight-loading progress bar for the duration."""
    from transformers.utils import logging

    enabled = logging.is_progress_bar_enabled()
    logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            logging.enable_progress_bar()


#: The adapter every part of the package goes through.
HUGGING_FACE = HuggingFaceFamily()
