"""The ``filterformer`` command.

Each sub-command is a module of this package with ``add_arguments(parser)`` and ``run(args)``;
``COMMANDS`` lists them in the order ``--help`` shows them.
"""

from __future__ import annotations

import argparse
import importlib
import sys

__all__ = ["main"]

COMMANDS: tuple[str, ...] = ("compare", "train", "diagnose", "bench", "evidence")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="filterformer",
        description="Self-attention as a graph filter: train, compare and diagnose Transformers.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"{__name__}.{name}")
        doc = (module.__doc__ or "").strip().splitlines()[0]
        command = sub.add_parser(name, help=doc, description=module.__doc__)
        module.add_arguments(command)
        command.set_defaults(_module=module)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return int(args._module.run(args) or 0)
    except ValueError as err:
        print(f"filterformer {args.command}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
