"""Measure over-smoothing per layer and write figures and diagnostics.json.

Each --checkpoint or --config is one model; all are shown the same batches and drawn on the same
axes. Batches come from a task's split (--task) or are generated at random (the default): token
ids when the model has a vocabulary, Gaussian features when it takes continuous inputs. A config
file (YAML, JSON or TOML) holds TransformerConfig fields; its model is randomly initialised with
--seed, so configs that differ in one option start from the same weights.

Or one pretrained model: --hf (a local Hugging Face model directory or all-MiniLM-L6-v2) reads
--text, the package's example sentences by default, tokenized with its own tokenizer; --timm
(a timm ViT with random weights) reads random images seeded by --seed. --patch METHOD
(--patch-option KEY=VALUE, repeated) adds the patched model beside the unpatched one. GFSA
starts as the attention it filters, so until it is trained its numbers are the unpatched
model's; NeuTRENO acts from the start: the command says so when two models' lines coincide.

The command says what it loads and computes, a line per model and per batch (--quiet: only the
results). Each run replaces the previous run's files in --out: diagnostics.json and the figures
a diagnose run writes are removed before the new ones are written, so no figure of an earlier
run's model is left beside the new ones; other files are left alone.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..checks import check_writable_directory
from ..diagnostics.inputs import TASK_SPLITS
from ..models import Transformer
from . import diagnose_pretrained
from .diagnose_output import remove_earlier_outputs

__all__ = ["add_arguments", "path_labels", "run"]


class _AppendModel(argparse.Action):
    """Collect --checkpoint and --config in the order given, each tagged with its kind."""

    def __call__(self, parser, namespace, value, option_string=None):
        models = list(getattr(namespace, self.dest) or [])
        models.append((option_string.lstrip("-"), Path(value)))
        setattr(namespace, self.dest, models)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    models = parser.add_argument_group("models (one or more, in order)")
    for flag, text in (
        ("--checkpoint", "a checkpoint written by `filterformer train` (its backbone)"),
        ("--config", "a YAML, JSON or TOML file of TransformerConfig fields (random init)"),
    ):
        models.add_argument(flag, dest="models", action=_AppendModel, metavar="PATH", help=text)
    diagnose_pretrained.add_arguments(models, parser)
    models.add_argument("--label", action="append", default=None,
                        help="the models' names in plots, in order (default: file names, with "
                             "their run directory where two are alike, e.g. gfsa/best and "
                             "softmax/best; --hf, --timm: the model's name, then NAME+METHOD)")
    models.add_argument("--compare", action="append", type=Path, default=[], metavar="JSON",
                        help="also draw the reports of an earlier diagnostics.json")
    data = parser.add_argument_group("batches")
    data.add_argument("--task", help="a task name for filterformer.data.load_task")
    data.add_argument("--task-option", action="append", default=[], metavar="KEY=VALUE",
                      help="an option of the task (value read as YAML)")
    data.add_argument("--split", choices=TASK_SPLITS, default="validation")
    data.add_argument("--num-samples", type=int, default=256,
                      help="samples to diagnose on (--hf: the first lines of --text)")
    data.add_argument("--batch-size", type=int, default=32)
    data.add_argument("--seq-len", type=int,
                      help="tokens per random sample (default: 64, or the model's max_len); "
                           "--hf: the most tokens per line (default: the model's limit)")
    data.add_argument("--seed", type=int, default=0,
                      help="seeds random weights and inputs (--config, --timm)")
    out = parser.add_argument_group("output")
    out.add_argument("--out", type=Path, default=Path("diagnostics"), help="output directory")
    out.add_argument("--formats", nargs="+", choices=("png", "svg", "pdf"),
                     help="figure formats (default: png svg)")
    out.add_argument("--no-attentions", action="store_true",
                     help="skip N×N attention maps (no frequency responses; for long inputs)")
    out.add_argument("--device", default="cpu")
    out.add_argument("--quiet", action="store_true",
                     help="print only the results, not what is loaded and computed")


def _load_model(kind: str, path: Path, seed: int, task: Any | None) -> Transformer:
    """The backbone of a training checkpoint, or a model of a config file seeded with ``seed``."""
    from ..training.checkpoint import load_backbone
    from ..training.config_files import load_transformer_config
    from ..training.model_size import check_model_size

    if kind == "checkpoint":
        return load_backbone(path)
    config = load_transformer_config(path, task)
    check_model_size(config, training=False)
    torch.manual_seed(seed)
    return Transformer(config)


def _load_task(args: argparse.Namespace) -> Any:
    # Imported on use: the data package loads its sources only when a run needs them.
    from ..data import GRAPH_KINDS, load_task
    from ..training.config_values import parse_assignments

    task = load_task(args.task, **parse_assignments(args.task_option, "--task-option"))
    if task.kind in GRAPH_KINDS:
        raise ValueError(f"--task {args.task!r} gives graph batches; diagnose graph models from "
                         "Python with capture(..., layers=[...]) instead")
    return task


def path_labels(paths: Sequence[Path]) -> list[str]:
    """Names of model files for plots: the file name without its suffix, and where two are
    alike (``runs/gfsa/checkpoints/best.pt`` and ``runs/softmax/checkpoints/best.pt``) the
    nearest directory that tells each apart (``gfsa/best``, ``softmax/best``); the same file
    given twice is numbered (``best``, ``best (2)``).
    """
    stems = [path.stem for path in paths]
    folders = [path.expanduser().resolve().parent.parts[::-1] for path in paths]
    labels = list(stems)
    for index, stem in enumerate(stems):
        alike = [other for other in range(len(paths)) if stems[other] == stem and other != index]
        if not alike:
            continue
        for depth, folder in enumerate(folders[index]):
            if all(depth >= len(folders[other]) or folders[other][depth] != folder
                   for other in alike):
                labels[index] = f"{folder}/{stem}"
                break
    for index, label in enumerate(labels):
        repeats = labels[:index].count(label)
        if repeats:
            labels[index] = f"{label} ({repeats + 1})"
    return labels


def _config_models(
    args: argparse.Namespace, task: Any | None, say: Callable[[str], None]
) -> Iterator[tuple[nn.Module, Any]]:
    """Each --checkpoint / --config model and its batches, loaded one at a time."""
    from ..diagnostics import random_batches, task_batches

    for kind, path in args.models or []:
        say(f"loading --{kind} {path}")
        model = _load_model(kind, path, args.seed, task)
        if task is not None:
            batches = task_batches(task, args.split, args.num_samples, args.batch_size)
        else:
            seq_len = args.seq_len or min(64, model.config.max_len)
            batches = random_batches(
                model.config, args.num_samples, args.batch_size, seq_len, args.seed
            )
        yield model, batches


def run(args: argparse.Namespace) -> int:
    # Imported here so that `filterformer --help` stays fast (matplotlib loads with the plots).
    from ..diagnostics import diagnose, load_reports
    from ..diagnostics.coinciding import coincidence_note, coinciding_reports

    pretrained = diagnose_pretrained.pretrained_request(args)
    models = args.models or []
    if not models and pretrained is None and not args.compare:
        raise ValueError("give at least one model: --checkpoint PATH, --config PATH, --hf PATH "
                         "or --timm NAME")
    names = pretrained.labels if pretrained else path_labels([path for _, path in models])
    labels = args.label or names
    if len(labels) != len(names):
        raise ValueError(f"--label must be given once per model ({len(names)}); got "
                         f"{len(labels)}")
    for name in ("num_samples", "batch_size", "seq_len"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be a positive integer")
    check_writable_directory("--out", args.out)  # before any model is loaded or diagnosed
    say = (lambda line: None) if getattr(args, "quiet", False) else print
    if pretrained is not None:
        copy = f" and a copy patched with {pretrained.patch}" if pretrained.patch else ""
        say(f"loading {pretrained.option} {pretrained.source}{copy}")
        loaded, batches, inputs = diagnose_pretrained.load_pretrained(pretrained, args)
        say(f"inputs: {inputs}")
        sources: Iterable[tuple[nn.Module, Any]] = ((model, batches()) for model in loaded)
    else:
        sources = _config_models(args, _load_task(args) if args.task else None, say)
    reports = []
    for (model, batches_of_model), label in zip(sources, labels, strict=True):
        say(f"diagnosing {label}")

        def batch_done(batches_done: int, samples: int, label: str = label) -> None:
            say(f"  {label}: batch {batches_done} done, {samples} samples")

        report = diagnose(model.to(args.device), batches_of_model, label=label,
                          attentions=not args.no_attentions, progress=batch_done)
        reports.append(report)
        print(f"{label}: {report.num_samples} samples, {report.num_layers} layers, cosine "
              f"similarity {report.token_cosine_similarity[0]:.3f} -> "
              f"{report.token_cosine_similarity[-1]:.3f}")
    for path in args.compare:
        try:
            reports += load_reports(path)
        except ValueError as err:
            raise ValueError(f"--compare: {err}") from None
    for later, earlier in coinciding_reports(reports):
        print(f"note: {coincidence_note(later, earlier)}")
    _write(reports, args, say)
    return 0


def _write(reports: list[Any], args: argparse.Namespace, say: Callable[[str], None]) -> None:
    """Replace an earlier run's files in --out with these reports and their figures."""
    from ..diagnostics import save_reports
    from ..diagnostics.figures import FIGURE_FORMATS, plot_report

    removed = remove_earlier_outputs(args.out)
    if removed:
        say(f"removed {len(removed)} files of an earlier diagnose run from {args.out}")
    summary = save_reports(reports, args.out / "diagnostics.json")
    say(f"drawing figures into {args.out}")
    figures = plot_report(reports, args.out, args.formats or FIGURE_FORMATS)
    print(f"wrote {summary} and {len(figures)} figures to {args.out}")
