"""Measure over-smoothing per layer and write figures and diagnostics.json.

Each --checkpoint or --config is one model; all are shown the same batches and drawn on the same
axes. Batches come from a task's split (--task) or are generated at random (the default): token
ids when the model has a vocabulary, Gaussian features when it takes continuous inputs. A config
file (YAML or JSON) holds TransformerConfig fields; its model is randomly initialised with --seed,
so configs that differ in one option start from the same weights.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import yaml

from ..models import Transformer, TransformerConfig

__all__ = ["add_arguments", "run"]

SPLITS = ("train", "validation", "test")


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
        ("--config", "a YAML or JSON file of TransformerConfig fields (random init)"),
    ):
        models.add_argument(flag, dest="models", action=_AppendModel, metavar="PATH", help=text)
    models.add_argument("--label", action="append", default=None,
                        help="the models' names in plots, in order (default: file names)")
    models.add_argument("--compare", action="append", type=Path, default=[], metavar="JSON",
                        help="also draw the reports of an earlier diagnostics.json")
    data = parser.add_argument_group("batches")
    data.add_argument("--task", help="a task name for filterformer.data.load_task")
    data.add_argument("--task-option", action="append", default=[], metavar="KEY=VALUE",
                      help="an option of the task (value read as YAML)")
    data.add_argument("--split", choices=SPLITS, default="validation")
    data.add_argument("--num-samples", type=int, default=256, help="samples to diagnose on")
    data.add_argument("--batch-size", type=int, default=32)
    data.add_argument("--seq-len", type=int,
                      help="tokens per random sample (default: 64, or the model's max_len)")
    data.add_argument("--seed", type=int, default=0, help="seeds random weights and inputs")
    out = parser.add_argument_group("output")
    out.add_argument("--out", type=Path, default=Path("diagnostics"), help="output directory")
    out.add_argument("--formats", nargs="+", choices=("png", "svg", "pdf"),
                     help="figure formats (default: png svg)")
    out.add_argument("--no-attentions", action="store_true",
                     help="skip N×N attention maps (no frequency responses; for long inputs)")
    out.add_argument("--device", default="cpu")


def _read_mapping(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ValueError(f"config file {str(path)!r} does not exist")
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"config file {str(path)!r} must hold a mapping of TransformerConfig "
                         "fields")
    return data


def _config(data: dict[str, Any], task: Any | None) -> TransformerConfig:
    """TransformerConfig from a config file's fields; a model without an input size takes the
    task's."""
    data = dict(data)
    if task is not None and data.get("vocab_size") is None and data.get("input_dim") is None:
        data.update(vocab_size=task.vocab_size, input_dim=task.input_dim)
        data.setdefault("max_len", task.max_len)
    return TransformerConfig.from_dict(data)


def load_model(kind: str, path: Path, seed: int, task: Any | None = None) -> Transformer:
    """The backbone of a training checkpoint, or a randomly initialised model of a config file."""
    if kind == "config":
        data = _read_mapping(path)
        config = _config(data, task)
        torch.manual_seed(seed)
        return Transformer(config)
    from ..training.checkpoint import load_checkpoint, load_model_state

    state = load_checkpoint(path)
    model = Transformer(TransformerConfig.from_dict(state["model_config"]))
    # Task heads hold the backbone under a prefix ("transformer.", "classifier.transformer.");
    # the diagnostics need the backbone only.
    anchor = "blocks.0.norm1.weight"
    prefixes = [key[: -len(anchor)] for key in state["model"] if key.endswith(anchor)]
    if len(prefixes) != 1:
        raise ValueError(f"checkpoint {path} holds no single filterformer Transformer backbone")
    prefix = prefixes[0]
    backbone = {k[len(prefix):]: v for k, v in state["model"].items() if k.startswith(prefix)}
    load_model_state(model, backbone, path)
    return model


def random_batches(
    config: TransformerConfig, num_samples: int, batch_size: int, seq_len: int, seed: int
) -> Iterator[dict[str, torch.Tensor]]:
    """Uniform token ids in ``[1, vocab_size)`` (0 is padding), or standard normal features
    (``inputs`` of ``input_dim``, or ready ``inputs_embeds`` for a model with neither)."""
    if seq_len > config.max_len:
        raise ValueError(f"seq-len ({seq_len}) must be at most the model's max_len "
                         f"({config.max_len})")
    generator = torch.Generator().manual_seed(seed)
    for start in range(0, num_samples, batch_size):
        size = min(batch_size, num_samples - start)
        mask = torch.ones(size, seq_len, dtype=torch.bool)
        if config.vocab_size is not None:
            ids = torch.randint(1, max(config.vocab_size, 2), (size, seq_len), generator=generator)
            yield {"input_ids": ids, "padding_mask": mask}
        elif config.input_dim is not None:
            inputs = torch.randn(size, seq_len, config.input_dim, generator=generator)
            yield {"inputs": inputs, "padding_mask": mask}
        else:
            inputs = torch.randn(size, seq_len, config.dim, generator=generator)
            yield {"inputs_embeds": inputs, "padding_mask": mask}


def _load_task(args: argparse.Namespace) -> Any:
    # Imported on use: the data package loads its sources only when a run needs them.
    from ..data import load_task

    options = {}
    for item in args.task_option:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--task-option must be KEY=VALUE; got {item!r}")
        options[key] = yaml.safe_load(value)
    task = load_task(args.task, **options)
    if task.kind == "graph_classification":
        raise ValueError(f"--task {args.task!r} gives graph batches; diagnose graph models from "
                         "Python with capture(..., layers=[...]) instead")
    return task


def _task_batches(task: Any, args: argparse.Namespace) -> Iterator[Any]:
    dataset = getattr(task, args.split)
    count = min(args.num_samples, len(dataset))
    subset = torch.utils.data.Subset(dataset, range(count))
    yield from torch.utils.data.DataLoader(
        subset, batch_size=args.batch_size, shuffle=False, collate_fn=task.collate
    )


def run(args: argparse.Namespace) -> int:
    # Imported here so that `filterformer --help` stays fast (matplotlib loads with the plots).
    from ..diagnostics import DiagnosticsReport, diagnose
    from ..diagnostics.plots import FIGURE_FORMATS, plot_report

    models = args.models or []
    if not models and not args.compare:
        raise ValueError("give at least one model: --checkpoint PATH or --config PATH")
    labels = args.label or [path.stem for _, path in models]
    if len(labels) != len(models):
        raise ValueError(f"--label must be given once per model ({len(models)}); got "
                         f"{len(labels)}")
    for name in ("num_samples", "batch_size", "seq_len"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be a positive integer")
    task = _load_task(args) if args.task else None
    reports = []
    for (kind, path), label in zip(models, labels, strict=True):
        model = load_model(kind, path, args.seed, task).to(args.device)
        if task is not None:
            batches = _task_batches(task, args)
        else:
            seq_len = args.seq_len or min(64, model.config.max_len)
            batches = random_batches(
                model.config, args.num_samples, args.batch_size, seq_len, args.seed
            )
        report = diagnose(model, batches, label=label, attentions=not args.no_attentions)
        reports.append(report)
        print(f"{label}: {report.num_samples} samples, {report.num_layers} layers, cosine "
              f"similarity {report.token_cosine_similarity[0]:.3f} -> "
              f"{report.token_cosine_similarity[-1]:.3f}")
    for path in args.compare:
        if not path.is_file():
            raise ValueError(f"--compare file {str(path)!r} does not exist")
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or "reports" not in data:
            raise ValueError(f"--compare file {str(path)!r} is not a diagnostics.json")
        reports += [DiagnosticsReport.from_dict(r) for r in data["reports"]]
    args.out.mkdir(parents=True, exist_ok=True)
    summary = args.out / "diagnostics.json"
    summary.write_text(json.dumps({"reports": [r.to_dict() for r in reports]}, indent=1))
    figures = plot_report(reports, args.out, args.formats or FIGURE_FORMATS)
    print(f"wrote {summary} and {len(figures)} figures to {args.out}")
    return 0
