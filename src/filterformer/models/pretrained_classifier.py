"""A pretrained backbone with a classification head, under the training contract.

:class:`PretrainedClassifier` puts pooling and a linear head on a pretrained model's last hidden
states: ``model(input_ids=…, padding_mask=…, labels=…)`` (``inputs=`` for image patches) returns
a :class:`~filterformer.models.ClassifierOutput`, as
:class:`~filterformer.models.SequenceClassifier` does. :class:`TransformersClassifier` wraps a
Hugging Face base model on token ids, :class:`TimmClassifier` a timm ViT on an image task's
patches.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from ..nn import SequencePooling
from .classifier import ClassifierOutput

__all__ = [
    "PretrainedClassifier",
    "TimmClassifier",
    "TransformersClassifier",
    "patches_to_images",
]


def patches_to_images(patches: Tensor, image_size: tuple[int, int], patch_size: int) -> Tensor:
    """The images an image task's patch sequences were cut from (the inverse of
    :func:`filterformer.data.images.patchify`).

    A ViT's patch embedding (a ``p × p`` convolution of stride ``p``) applied to these images is
    a linear map of each of the task's patches, in the task's row-major order.

    Args:
        patches: ``(B, (H/p)·(W/p), p²)``.
        image_size: ``(H, W)``.
        patch_size: ``p``.

    Returns:
        ``(B, 1, H, W)``.
    """
    height, width = image_size
    rows, cols = height // patch_size, width // patch_size
    grid = patches.reshape(patches.shape[0], rows, cols, patch_size, patch_size)
    return grid.transpose(2, 3).reshape(patches.shape[0], 1, height, width)


class PretrainedClassifier(nn.Module):
    """A pretrained backbone, pooling over its last hidden states, and a linear head.

    Subclasses say how a training batch becomes the backbone's inputs
    (:meth:`backbone_inputs`, which :func:`filterformer.diagnostics.diagnose` also takes with
    :attr:`backbone`) and how the backbone gives its last hidden states.

    Args:
        backbone: the (patched or unpatched) pretrained model.
        dim: its hidden width D.
        num_classes: the head's classes.
        pooling: ``mean`` over real tokens, ``first`` token or ``attention``
            (:class:`~filterformer.nn.SequencePooling`).
    """

    def __init__(self, backbone: nn.Module, dim: int, num_classes: int, pooling: str) -> None:
        super().__init__()
        self.backbone = backbone
        self.pool = SequencePooling(pooling, dim)
        self.head = nn.Linear(dim, num_classes)

    def backbone_inputs(self, batch: Mapping[str, Any]) -> dict[str, Tensor]:
        """The backbone's keyword inputs for a task batch (``labels`` are left out)."""
        raise NotImplementedError

    def last_hidden_state(self, inputs: Mapping[str, Tensor]) -> tuple[Tensor, Tensor | None]:
        """``(B, N, D)`` last hidden states and their ``(B, N)`` padding mask (None: all real)."""
        raise NotImplementedError

    def forward(
        self,
        input_ids: Tensor | None = None,
        *,
        inputs: Tensor | None = None,
        padding_mask: Tensor | None = None,
        labels: Tensor | None = None,
    ) -> ClassifierOutput:
        """Classify a batch: ``input_ids`` ``(B, N)`` or image patches ``inputs``
        ``(B, P, p²)``, ``padding_mask`` ``(B, N)`` (True at real tokens), ``labels`` ``(B,)``.
        """
        batch = {"input_ids": input_ids, "inputs": inputs, "padding_mask": padding_mask}
        hidden, mask = self.last_hidden_state(self.backbone_inputs(batch))
        logits = self.head(self.pool(hidden, mask))
        loss = F.cross_entropy(logits, labels) if labels is not None else None
        return ClassifierOutput(logits=logits, loss=loss)


class TransformersClassifier(PretrainedClassifier):
    """A Hugging Face base model (BERT, RoBERTa, …) on token ids of its own tokenizer."""

    def backbone_inputs(self, batch: Mapping[str, Any]) -> dict[str, Tensor]:
        input_ids = batch.get("input_ids")
        if input_ids is None:
            raise ValueError("a Hugging Face text model takes input_ids (a text task)")
        mask = batch.get("padding_mask")
        if mask is None:
            mask = torch.ones_like(input_ids, dtype=torch.bool)
        return {"input_ids": input_ids, "attention_mask": mask.long()}

    def last_hidden_state(self, inputs: Mapping[str, Tensor]) -> tuple[Tensor, Tensor | None]:
        hidden = self.backbone(**inputs).last_hidden_state
        return hidden, inputs["attention_mask"].bool()


class TimmClassifier(PretrainedClassifier):
    """A timm ViT on an image task's patches, put back into images (:func:`patches_to_images`).

    Every token the ViT outputs is real: ``mean`` pooling averages the class token and the
    patches, ``first`` takes the class token.
    """

    def __init__(self, backbone: nn.Module, num_classes: int, pooling: str,
                 image_size: tuple[int, int], patch_size: int) -> None:
        super().__init__(backbone, backbone.embed_dim, num_classes, pooling)
        self.image_size = tuple(image_size)
        self.patch_size = patch_size

    def backbone_inputs(self, batch: Mapping[str, Any]) -> dict[str, Tensor]:
        patches = batch.get("inputs")
        if patches is None:
            raise ValueError("a timm ViT takes image patches as inputs (an image task)")
        return {"images": patches_to_images(patches, self.image_size, self.patch_size)}

    def last_hidden_state(self, inputs: Mapping[str, Tensor]) -> tuple[Tensor, Tensor | None]:
        return self.backbone.forward_features(inputs["images"]), None
