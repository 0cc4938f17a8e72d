"""Short names for the figures' panels: layers named from module paths, wrapped titles.

A Hugging Face layer is called ``encoder.layer.0.attention.self.filterformer_gfsa`` in its model:
as a subplot title it runs into its neighbours. The number in the path is the layer's index, and
``layer 0`` says all a panel needs.
"""

from __future__ import annotations

import textwrap

__all__ = ["layer_title", "wrap_title"]

#: Characters per title line in the figures' small subplots.
TITLE_WIDTH = 28


def layer_title(module_name: str, width: int = TITLE_WIDTH) -> str:
    """``layer <n>`` from the first integer in a module path, else the path's end, abbreviated.

    Args:
        module_name: a qualified module name, e.g. ``blocks.3.attn``.
        width: the most characters of a name without an index.

    Returns:
        ``"layer 3"`` for ``blocks.3.attn``; ``"…self.gfsa"`` style tails for names without one.
    """
    parts = module_name.split(".")
    for part in parts:
        if part.isdigit():
            return f"layer {int(part)}"
    tail = ".".join(parts[-2:])
    return tail if len(tail) <= width else "…" + tail[-(width - 1):]


def wrap_title(text: str, width: int = TITLE_WIDTH) -> str:
    """``text`` broken into lines of at most ``width`` characters (at spaces where it can)."""
    return "\n".join(textwrap.wrap(text, width, break_long_words=True)) or text
