"""Input embeddings: token ids or continuous features, plus positions."""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import torch
from torch import Tensor, nn

__all__ = ["POSITIONS", "InputEmbedding", "ids_chosen_by_the_model", "sinusoidal_positions"]

POSITIONS = ("learned", "sinusoidal", "none")

#: Whether the token ids being embedded were chosen from the model's own logits.
_IDS_FROM_LOGITS: ContextVar[bool] = ContextVar("ids_from_logits", default=False)


@contextmanager
def ids_chosen_by_the_model() -> Iterator[None]:
    """A context in which the token ids fed to the model are ones it chose from its logits
    (argmax or a sample over its vocabulary), so in range by construction: their range check,
    which reads them on the host and so waits for the device once a generated token, is skipped.
    """
    token = _IDS_FROM_LOGITS.set(True)
    try:
        yield
    finally:
        _IDS_FROM_LOGITS.reset(token)


def sinusoidal_positions(length: int, dim: int) -> Tensor:
    """The fixed sin/cos table of Vaswani et al., ``(length, dim)``."""
    position = torch.arange(length, dtype=torch.float32)[:, None]
    freq = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    table = torch.zeros(length, dim)
    table[:, 0::2] = torch.sin(position * freq)
    table[:, 1::2] = torch.cos(position * freq[: dim // 2])
    return table


class InputEmbedding(nn.Module):
    """Embed ``input_ids`` ``(B, N)``, ``inputs`` ``(B, N, F)`` or ready ``inputs_embeds``.

    Every model's input passes through here, so this is where bad input is refused with a
    ValueError rather than a NaN or an indexing error deeper down: an empty sequence (N = 0),
    token ids outside ``[0, vocab_size)``, or a sequence longer than ``max_len``.

    Args:
        dim: width D.
        vocab_size: token vocabulary (enables ``input_ids``).
        input_dim: features per token (enables ``inputs`` through a linear map).
        max_len: the longest sequence (positions ``0..max_len-1``).
        position: ``"learned"``, ``"sinusoidal"`` or ``"none"``.
        dropout: dropout on the sum.
    """

    def __init__(
        self,
        dim: int,
        *,
        vocab_size: int | None = None,
        input_dim: int | None = None,
        max_len: int = 512,
        position: str = "learned",
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        if position not in POSITIONS:
            raise ValueError(f"position must be one of {POSITIONS}; got {position!r}")
        self.max_len = max_len
        self.tokens = nn.Embedding(vocab_size, dim) if vocab_size else None
        self.features = nn.Linear(input_dim, dim) if input_dim else None
        self.position = position
        if position == "learned":
            self.positions = nn.Embedding(max_len, dim)
            nn.init.normal_(self.positions.weight, std=0.02)
        elif position == "sinusoidal":
            self.register_buffer("positions", sinusoidal_positions(max_len, dim), persistent=False)
        self.drop = nn.Dropout(dropout)

    def forward(
        self,
        input_ids: Tensor | None = None,
        *,
        inputs: Tensor | None = None,
        inputs_embeds: Tensor | None = None,
        offset: int = 0,
    ) -> Tensor:
        """Exactly one of the three inputs; ``offset`` is the first position (decoding).

        Args:
            input_ids: ``(B, N)`` integer token ids in ``[0, vocab_size)``, or
            inputs: ``(B, N, input_dim)`` continuous features, or
            inputs_embeds: ``(B, N, D)`` ready embeddings.
            offset: the position of the first of the N tokens.

        Returns:
            ``(B, N, D)``.

        Raises:
            ValueError: for N = 0, ids outside ``[0, vocab_size)`` (naming the smallest and
                largest offending ids), a wrong shape or ``offset + N > max_len``.
            TypeError: for ``input_ids`` that are not an integer tensor.
            RuntimeError: under :func:`torch.compile`, for ids outside ``[0, vocab_size)``: the
                check runs on the device (``torch._assert_async``), not on the host.
        """
        given = [name for name, t in (("input_ids", input_ids), ("inputs", inputs),
                                      ("inputs_embeds", inputs_embeds)) if t is not None]
        if len(given) != 1:
            raise ValueError(f"pass exactly one of input_ids, inputs, inputs_embeds; got {given}")
        if input_ids is not None:
            if self.tokens is None:
                raise ValueError("input_ids needs a model built with vocab_size")
            if input_ids.dim() != 2:
                raise ValueError(f"input_ids must be (B, N); got {tuple(input_ids.shape)}")
            _check_length("input_ids", input_ids)
            _check_token_ids(input_ids, self.tokens.num_embeddings)
            x = self.tokens(input_ids)
        elif inputs is not None:
            if self.features is None:
                raise ValueError("inputs needs a model built with input_dim")
            if inputs.dim() != 3:
                raise ValueError(f"inputs must be (B, N, input_dim); got {tuple(inputs.shape)}")
            _check_length("inputs", inputs)
            x = self.features(inputs)
        else:
            if inputs_embeds.dim() != 3:
                shape = tuple(inputs_embeds.shape)
                raise ValueError(f"inputs_embeds must be (B, N, D); got {shape}")
            _check_length("inputs_embeds", inputs_embeds)
            x = inputs_embeds
        length = x.shape[1]
        if self.position != "none":
            if offset + length > self.max_len:
                raise ValueError(
                    f"sequence of {offset + length} positions exceeds max_len={self.max_len}"
                )
            index = torch.arange(offset, offset + length, device=x.device)
            table = self.positions(index) if self.position == "learned" else self.positions[index]
            x = x + table.to(x.dtype)
        return self.drop(x)


def _check_length(name: str, tensor: Tensor) -> None:
    # Attention over zero keys is a softmax over nothing: NaN outputs, not an error.
    if tensor.shape[1] == 0:
        raise ValueError(
            f"{name} has sequence length N = 0 (shape {tuple(tensor.shape)}); a model needs at "
            "least one position"
        )


def _check_token_ids(input_ids: Tensor, vocab_size: int) -> None:
    if input_ids.dtype not in (torch.int64, torch.int32):
        raise TypeError(
            "input_ids must be an integer tensor (torch.long or torch.int32); got "
            f"{input_ids.dtype}"
        )
    if input_ids.numel() == 0:  # an empty batch (B = 0) holds no id to check
        return
    if torch.compiler.is_compiling():
        # Reading the ids on the host would break the compiled graph and wait for the device at
        # every step; the check runs on the device instead (an error when the step runs).
        inside = ((input_ids >= 0) & (input_ids < vocab_size)).all()
        torch._assert_async(inside, f"input_ids must lie in [0, vocab_size) = [0, {vocab_size})")
        return
    if _IDS_FROM_LOGITS.get():  # the model's own choices: in range by construction
        return
    low, high = torch.stack(torch.aminmax(input_ids)).tolist()  # one host sync, not two
    if low >= 0 and high < vocab_size:
        return
    outside = input_ids[(input_ids < 0) | (input_ids >= vocab_size)]
    raise ValueError(
        f"input_ids must lie in [0, vocab_size) = [0, {vocab_size}); {outside.numel()} id(s) "
        f"out of range, smallest {outside.min().item()}, largest {outside.max().item()}"
    )
