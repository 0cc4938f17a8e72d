"""Compare attention methods on one task: accuracy, cost and over-smoothing side by side.

Trains every method with every seed under the same budget, then writes results.json,
results.csv, figures and report.html into the output directory. With no arguments it runs the
built-in comparison (ListOps, 7 methods, 3 seeds). Re-running with the same output directory
reuses finished runs and resumes stopped ones; a comparison with another budget (--set, --config)
needs an output directory of its own (--output-dir), and is refused in one that holds another.
Runs train several at once, each in its own process (--jobs), with the same results as one after
another; each run reports its steps and evaluations while it trains, and a line per finished run
says how many are done and the time left.

Examples:
  filterformer compare
  filterformer compare --jobs 1 --quiet
  filterformer compare --compile --methods softmax gfsa
  filterformer compare --config experiments/c3_japanese_vowels_lr.yaml --dry-run
  filterformer compare --methods softmax gfsa gfsa+neutreno --seeds 0 1 --set epochs=8 \
      --output-dir runs/epochs8
  filterformer compare --set task=listops task_options.preset=tiny --output-dir runs/listops
"""

from __future__ import annotations

import argparse
import shlex
import sys

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("--config", metavar="FILE",
                        help="a .yaml/.yml/.toml file: the budget every run shares (a train "
                             "config), optionally with a 'compare:' section (methods, seeds, "
                             "baseline, diagnostics_batches); the built-in comparison when omitted")
    parser.add_argument("--set", dest="overrides", metavar="KEY=VALUE", nargs="+",
                        action="extend", default=[],
                        help="override keys of the shared budget, e.g. epochs=8 model.depth=6")
    parser.add_argument("--methods", nargs="+", metavar="METHOD",
                        help="methods to compare (presets, or presets joined by '+'); default: "
                             "softmax gfsa neutreno agf samsa_soft samsa_hard fusion")
    parser.add_argument("--seeds", nargs="+", type=int, metavar="SEED",
                        help="one run per method and seed (default: 0 1 2)")
    parser.add_argument("--baseline", metavar="NAME",
                        help="the method every other is compared with, seed by seed (default: "
                             "softmax when compared, else the first method)")
    parser.add_argument("--output-dir", metavar="DIR",
                        help="the comparison directory (default: runs/compare)")
    parser.add_argument("--diagnostics-batches", type=int, metavar="N",
                        help="validation batches the over-smoothing diagnostics use (default 2)")
    parser.add_argument("--threads", type=int, default=1, metavar="N",
                        help="CPU threads torch uses in each run (default 1: small models gain "
                             "little from more, and step timings stay comparable on a shared "
                             "machine; 0 keeps torch's own choice)")
    parser.add_argument("--jobs", type=int, metavar="N",
                        help="runs trained at once, each in its own process (default: as many "
                             "as fit the CPU cores, cores // threads; 1 on a GPU); 1 trains "
                             "them one after another in this process. Results are the same "
                             "whatever N, timings aside")
    parser.add_argument("--compile", action="store_true",
                        help="compile every run's training step with torch.compile "
                             "(compile=true), and the steps the time-per-step column times")
    parser.add_argument("--dry-run", action="store_true",
                        help="check the comparison without training it: load the task, build "
                             "every method's model and take one training step with each; "
                             "nothing is written")
    parser.add_argument("--quiet", action="store_true",
                        help="print only the final summary: no line per run, no progress")
    parser.add_argument("--no-progress", action="store_true",
                        help="hide each run's own progress (bar or lines), keep the line per "
                             "run (progress=false)")


def command_line(args: argparse.Namespace) -> str:
    """The command as one could type it again: ``filterformer compare`` and its options."""
    words = ["filterformer", "compare"]
    if args.config:
        words += ["--config", args.config]
    if args.overrides:
        words += ["--set", *args.overrides]
    for flag, value in (("--methods", args.methods), ("--seeds", args.seeds)):
        if value:
            words += [flag, *map(str, value)]
    for flag, value in (("--baseline", args.baseline), ("--output-dir", args.output_dir),
                        ("--diagnostics-batches", args.diagnostics_batches),
                        ("--jobs", args.jobs)):
        if value is not None:
            words += [flag, str(value)]
    if args.threads != 1:
        words += ["--threads", str(args.threads)]
    words += [flag for flag, on in (("--compile", args.compile), ("--quiet", args.quiet),
                                    ("--no-progress", args.no_progress)) if on]
    return shlex.join(words)


def run(args: argparse.Namespace) -> int:
    # Imported here so that `filterformer --help` stays fast.
    import torch

    from ..checks import check_integer
    from ..training.compare import compare, dry_run, load_compare_config
    from ..training.compare.execution import RunFailedError
    from ..training.progress import print_line

    if args.threads < 0:
        raise ValueError(f"--threads must be 0 (torch's choice) or more; got {args.threads}")
    # Checked here, so that --dry-run refuses what the comparison itself would.
    if args.jobs is not None:
        check_integer("--jobs", args.jobs,
                      hint=" (runs trained at once; omit it for as many as fit the cores)")
    if args.threads:
        torch.set_num_threads(args.threads)
    overrides = list(args.overrides)
    if args.output_dir:
        overrides.append(f"output_dir={args.output_dir}")
    if args.no_progress or args.quiet:
        overrides.append("progress=false")
    if args.compile:
        overrides.append("compile=true")
    options = {"methods": args.methods, "seeds": args.seeds, "baseline": args.baseline,
               "diagnostics_batches": args.diagnostics_batches}
    config = load_compare_config(
        args.config, overrides, **{k: v for k, v in options.items() if v is not None}
    )
    echo = (lambda line: None) if args.quiet else print_line
    if args.dry_run:
        dry_run(config, echo=echo)
        return 0
    try:
        results = compare(config, jobs=args.jobs, echo=echo, command=command_line(args))
    except RunFailedError as err:  # a run's own failure: say which, without our traceback
        print(f"filterformer compare: error: {err}", file=sys.stderr)
        return 2
    out = config.output_dir
    print(f"compared {len(results.methods)} methods × {len(results.seeds)} seeds in "
          f"{results.elapsed_s / 60:.1f} min")
    print(f"report: {out / 'report.html'}\ntable: {out / 'results.csv'}\n"
          f"results: {out / 'results.json'}")
    return 0
