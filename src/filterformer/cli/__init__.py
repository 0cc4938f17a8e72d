"""The ``filterformer`` command.

Each sub-command is a module of this package with ``add_arguments(parser)`` and ``run(args)``;
``COMMANDS`` lists them in the order ``--help`` shows them; ``--version`` prints the package's
version. A mistyped option prints its sub-command's usage and error. Every failure ends in one line,
``filterformer COMMAND: error: ...``, and exit status 2; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading

from .. import __version__
from .failures import command_warnings, describe_failure

__all__ = ["main"]

COMMANDS: tuple[str, ...] = ("compare", "train", "generate", "diagnose", "bench", "evidence")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="filterformer",
        description="Self-attention as a graph filter: train, compare and diagnose Transformers.",
    )
    parser.add_argument("--version", action="version", version=f"filterformer {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="on a failure, show the Python traceback instead of a one-line error")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"{__name__}.{name}")
        doc = (module.__doc__ or "").strip().splitlines()[0]
        command = sub.add_parser(name, help=doc, description=module.__doc__)
        module.add_arguments(command)
        command.set_defaults(_module=module, _parser=command)
    return parser


def _exit_when_terminated(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit status. SIGTERM (``kill``, a job scheduler) ends a command as
    Ctrl-C does: ``compare`` stops its worker processes, and runs under way resume from their
    last checkpoints next time."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        # A sub-command's own usage and error (argparse would show the top-level usage).
        command = parser if args.command is None else args._parser
        command.error(f"unrecognized arguments: {' '.join(unknown)}")
    if args.command is None:
        parser.print_help()
        return 2
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _exit_when_terminated) if in_main_thread else None
    try:
        with command_warnings(args.command):
            return int(args._module.run(args) or 0)
    except Exception as err:  # every failure: one line and exit 2 (SystemExit, Ctrl-C pass)
        if args.debug:
            raise
        print(f"filterformer {args.command}: error: {describe_failure(err)}", file=sys.stderr)
        return 2
    finally:
        if in_main_thread:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
