"""Train one model on one task from a config file (YAML or TOML) and overrides.

While it trains it shows its progress on stderr: a bar on a terminal, otherwise a line every
10 s, as each evaluation starts and after it ends (step, epoch, loss, validation metric, steps/s,
time left; the final test's metric);
`--quiet` prints only the final summary.

Examples:
  filterformer train --config configs/listops_tiny.yaml --set method=gfsa optimizer.lr=5e-4
  filterformer train --config configs/listops_tiny.yaml --resume        # continue a stopped run
  filterformer train --config configs/listops_tiny.yaml --compile       # torch.compile the step
  torchrun --nproc_per_node=2 --no-python filterformer train --config ...   # DDP, 2 processes
"""

from __future__ import annotations

import argparse
import json
import sys

import yaml

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--config", metavar="FILE",
                        help="a .yaml/.yml/.toml run config (defaults when omitted)")
    parser.add_argument("--set", dest="overrides", metavar="KEY=VALUE", nargs="+",
                        action="extend", default=[],
                        help="override config keys, e.g. model.depth=6 optimizer.lr=1e-3 "
                             "method=gfsa+neutreno")
    parser.add_argument("--output-dir", metavar="DIR", help="the run directory (output_dir)")
    parser.add_argument("--resume", action="store_true",
                        help="continue the run in the output directory from its last checkpoint, "
                             "with the configuration it was saved with (--config only locates "
                             "the run; --set may change session keys such as progress)")
    parser.add_argument("--compile", action="store_true",
                        help="compile the training step with torch.compile (compile=true): the "
                             "same results up to round-off, faster steps after a first one "
                             "that compiles")
    parser.add_argument("--quiet", "--no-progress", action="store_true",
                        help="print only the final summary: no progress bar or lines "
                             "(progress=false)")
    parser.add_argument("--print-config", action="store_true",
                        help="print the resolved config as YAML and exit")


def run(args: argparse.Namespace) -> int:
    # Imported here so that `filterformer --help` stays fast.
    from ..training import load_config, train
    from ..training.distributed import torchrun_rank, torchrun_world_size
    from ..training.resumed_config import resumed_config

    overrides = list(args.overrides)
    if args.output_dir:
        overrides.append(f"output_dir={args.output_dir}")
    if args.quiet:
        overrides.append("progress=false")
    if args.compile:
        overrides.append("compile=true")
    config = load_config(args.config, overrides)
    if args.resume:
        resumed = resumed_config(config, overrides)
        config = resumed.config
        if resumed.ignored and torchrun_rank() == 0:
            print(f"resuming the run as saved in {resumed.checkpoint}; it differs from "
                  f"{args.config or 'the defaults'} in {'; '.join(resumed.ignored)} "
                  "(the saved values are kept)", file=sys.stderr)
    if args.print_config:
        print(yaml.safe_dump(config.to_dict(), sort_keys=False), end="")
        return 0
    result = train(config, resume=args.resume)
    if torchrun_rank() == 0:
        state = "finished" if result.completed else "stopped (continue with --resume)"
        if result.stopped_early:
            count = config.patience
            state = (f"finished early (no improvement in the last {count} "
                     f"validation{'' if count == 1 else 's'})")
        print(f"run {state} after {result.steps} steps on {torchrun_world_size()} process(es)")
        print(json.dumps({"best_validation": result.best_validation, "test": result.test},
                         indent=1))
        print(f"metrics and checkpoints: {result.run_dir}")
    return 0
