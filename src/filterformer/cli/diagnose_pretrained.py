"""The pretrained models of ``filterformer diagnose``: ``--hf`` and ``--timm``, with ``--patch``.

A Hugging Face model (all-MiniLM-L6-v2 or a local directory, read offline) reads ``--text``, the
package's example sentences by default, tokenized with the model directory's own tokenizer. A
timm ViT is built with random weights (``pretrained=False``: no timm weights ship offline),
seeded by ``--seed``, and reads random images from the same seed. Both are loaded through their
family's adapter (:mod:`filterformer.families`), as a pretrained training run's are. With
``--patch`` a second copy of the model is patched with :func:`filterformer.patch`; both see the
same batches.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..families import HUGGING_FACE, MINILM, TIMM

__all__ = ["PretrainedRequest", "add_arguments", "load_pretrained", "pretrained_request"]

#: The command-line options of each pretrained source, named in errors.
HF_OPTION, TIMM_OPTION = "--hf", "--timm"
#: Batches for the models: a function giving the same stream at every call.
BatchStream = Callable[[], Iterable[Any]]


def add_arguments(models: argparse._ArgumentGroup, parser: argparse.ArgumentParser) -> None:
    """The ``--hf`` / ``--timm`` options (in the models group) and their own group."""
    models.add_argument("--hf", metavar="PATH",
                        help="a local Hugging Face model directory, or all-MiniLM-L6-v2 (read "
                             "offline, pretrained weights)")
    models.add_argument("--timm", metavar="NAME",
                        help="a timm ViT architecture, e.g. vit_tiny_patch16_224 (random weights "
                             "seeded by --seed: none ship offline)")
    group = parser.add_argument_group("pretrained models (--hf, --timm)")
    group.add_argument("--patch", metavar="METHOD",
                       help="also diagnose the model patched with METHOD (gfsa, neutreno, fusion "
                            "or several joined by '+'), beside the unpatched one")
    group.add_argument("--patch-option", action="append", default=[], metavar="KEY=VALUE",
                       help="an option of filterformer.patch (K, learn, exact_power, base, "
                            "neutreno_lambda, neutreno_learnable, neutreno_warmup, fusion, layers; "
                            "value read as YAML), repeated")
    group.add_argument("--text", type=Path, metavar="FILE",
                       help="--hf inputs, one a line (default: the package's example sentences)")
    group.add_argument("--image-size", type=int, metavar="PIXELS",
                       help="--timm: side of the random square images (default: the model's)")


@dataclass(frozen=True)
class PretrainedRequest:
    """What ``--hf`` / ``--timm`` ask for, checked before any model loads.

    Attributes:
        option: :data:`HF_OPTION` or :data:`TIMM_OPTION`.
        source: the model directory (or all-MiniLM-L6-v2), or the timm architecture.
        patch: the :func:`filterformer.patch` method, or None for the unpatched model only.
        patch_options: the patch's options, typed.
    """

    option: str
    source: str
    patch: str | None = None
    patch_options: dict[str, Any] = field(default_factory=dict)

    @property
    def labels(self) -> list[str]:
        """The models' default names: the source's, then ``<name>+<patch>``."""
        name = self.source
        if self.option == HF_OPTION and name != MINILM:
            name = Path(name).expanduser().resolve().name
        return [name] + ([f"{name}+{self.patch}"] if self.patch else [])


def pretrained_request(args: argparse.Namespace) -> PretrainedRequest | None:
    """The pretrained model asked for (None for none), every option checked against the others.

    Raises:
        ValueError: naming the argument, for options that do not go together, a missing
            directory, or an unknown patch method or option.
    """
    given = [(option, value) for option, value in ((HF_OPTION, args.hf), (TIMM_OPTION, args.timm))
             if value is not None]
    if len(given) == 2:
        raise ValueError("--hf and --timm cannot be used together: a run diagnoses one "
                         "pretrained model (and its --patch); draw two runs together with "
                         "--compare")
    option, source = given[0] if given else (None, None)
    if args.text is not None and option != HF_OPTION:
        raise ValueError("--text gives sentences to a --hf model; " + (
            "--timm models read random images (sized by --image-size)" if option == TIMM_OPTION
            else "none was given"))
    if args.image_size is not None and option != TIMM_OPTION:
        raise ValueError("--image-size sizes the random images of a --timm model; " + (
            "--hf models read --text" if option == HF_OPTION else "none was given"))
    if option is None:
        if args.patch is not None or args.patch_option:
            raise ValueError("--patch and --patch-option patch a --hf or --timm model; a "
                             "--config model takes its method in the config")
        return None
    if args.models:
        raise ValueError(f"{option} cannot be combined with --checkpoint or --config: they read "
                         "other inputs; diagnose them in separate runs and draw them together "
                         "with --compare")
    if args.task is not None:
        raise ValueError(f"--task gives batches to --checkpoint and --config models; {option} "
                         "models read " + ("--text" if option == HF_OPTION else "random images"))
    if option == HF_OPTION:
        _check_hf_source(source)
    if args.image_size is not None and args.image_size < 1:
        raise ValueError("--image-size must be a positive integer")
    if args.patch is None:
        if args.patch_option:
            raise ValueError("--patch-option needs --patch METHOD")
        return PretrainedRequest(option, source)
    return PretrainedRequest(option, source, args.patch, _patch_options(args))


def _check_hf_source(source: str) -> None:
    problem = HUGGING_FACE.source_problem(source)
    if problem is not None:
        raise ValueError(f"--hf must be {MINILM!r} or a local directory of a Hugging Face "
                         f"model (with config.json; nothing is downloaded); {source!r} {problem}")


def _patch_options(args: argparse.Namespace) -> dict[str, Any]:
    from ..method_spec import parse_patch
    from ..training.config_values import parse_assignments

    try:
        parse_patch(args.patch)
    except ValueError as err:
        raise ValueError(f"--patch: {err}") from None
    options = parse_assignments(args.patch_option, "--patch-option")
    try:
        parse_patch(args.patch, **options)
    except ValueError as err:
        raise ValueError(f"--patch-option: {err}") from None
    return options


def load_pretrained(
    request: PretrainedRequest, args: argparse.Namespace
) -> tuple[list[nn.Module], BatchStream, str]:
    """The models (unpatched, then patched when asked), their batches and a line saying what
    the inputs are. Both models are built before either is diagnosed, so that a patch the model
    refuses stops the command first.

    Raises:
        ValueError: naming the argument, for inputs or a model that cannot be read, or a patch
            the model refuses.
    """
    from ..data.sources import MissingSourceError

    try:
        if request.option == HF_OPTION:
            return _load_hf(request, args)
        return _load_timm(request, args)
    except MissingSourceError as err:
        raise ValueError(f"{request.option} {request.source}: {err}") from None


def _patched(model: nn.Module, request: PretrainedRequest) -> nn.Module:
    from ..patching import patch

    try:
        patch(model, request.patch, **request.patch_options)
    except ValueError as err:
        raise ValueError(f"--patch {request.patch}: {err}") from None
    return model


def _models(build: Callable[[], nn.Module], request: PretrainedRequest) -> list[nn.Module]:
    models = [build()]
    if request.patch is not None:
        models.append(_patched(build(), request))
    return models


def _read_text(path: Path | None, num_samples: int) -> tuple[list[str], str]:
    from ..diagnostics import example_sentences

    if path is None:
        lines, where = example_sentences(), "of the package's example sentences"
    else:
        if not path.is_file():
            raise ValueError(f"--text {path} is not a file")
        lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
        lines, where = [line for line in lines if line], f"lines of {path}"
        if not lines:
            raise ValueError(f"--text {path} has no non-empty line")
    return lines[:num_samples], where


def _load_hf(
    request: PretrainedRequest, args: argparse.Namespace
) -> tuple[list[nn.Module], BatchStream, str]:
    from ..diagnostics import text_batches

    texts, where = _read_text(args.text, args.num_samples)
    directory = HUGGING_FACE.directory(request.source)
    # The config first: its refusal of a directory's own code is not reworded as the
    # tokenizer's errors are.
    config = HUGGING_FACE.config(request.source)
    tokenizer = _tokenizer(request.source, directory)
    longest = getattr(config, "max_position_embeddings", None)
    if args.seq_len is not None and isinstance(longest, int) and args.seq_len > longest:
        raise ValueError(f"--seq-len ({args.seq_len}) must be at most the model's "
                         f"max_position_embeddings ({longest})")
    # A tokenizer without a limit of its own reports a huge model_max_length.
    limits = [n for n in (tokenizer.model_max_length, longest) if isinstance(n, int) and n < 10**6]
    max_length = args.seq_len or (min(limits) if limits else 512)
    batches = text_batches(tokenizer, texts, args.batch_size, max_length)
    vocabulary = getattr(config, "vocab_size", None)
    largest = max(int(batch["input_ids"].max()) for batch in batches)
    if isinstance(vocabulary, int) and largest >= vocabulary:
        raise ValueError(f"--hf {request.source}: its tokenizer gives token id {largest}, outside "
                         f"the model's vocabulary of {vocabulary}")
    models = _models(lambda: HUGGING_FACE.load(request.source), request)
    described = (f"{len(texts)} {where}, tokenized by the tokenizer of {directory} (at most "
                 f"{max_length} tokens each)")
    return models, lambda: batches, described


def _tokenizer(source: str, directory: Path) -> Any:
    try:
        tokenizer = HUGGING_FACE.tokenizer(source)
    except (OSError, ValueError, TypeError) as err:
        raise ValueError(f"--hf {source}: no tokenizer can be read from {directory} ({err}); "
                         "--hf reads text with the model directory's own tokenizer") from None
    if len(tokenizer) <= len(set(tokenizer.all_special_ids)):
        # transformers makes a tokenizer of special tokens alone from a directory without
        # vocabulary files: every word would be unknown.
        raise ValueError(f"--hf {source}: {directory} holds no tokenizer vocabulary; --hf reads "
                         "text with the model directory's own tokenizer (save it there with "
                         "tokenizer.save_pretrained)")
    if tokenizer.pad_token is None:
        # GPT-style tokenizers have no padding token; the attention mask hides padding anyway.
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def _load_timm(
    request: PretrainedRequest, args: argparse.Namespace
) -> tuple[list[nn.Module], BatchStream, str]:
    from ..diagnostics import image_batches

    name = request.source
    options: dict[str, Any] = {}
    if args.image_size is not None:
        options["img_size"] = args.image_size

    def build() -> nn.Module:
        torch.manual_seed(args.seed)  # the same random weights for both models
        try:
            return TIMM.create(name, vit_only=False, **options)
        except ValueError as err:
            raise ValueError(f"{TIMM_OPTION}: {err}") from None

    models = _models(build, request)
    embed = models[0].patch_embed
    if getattr(embed, "num_patches", None) == 0:
        raise ValueError(f"--image-size {args.image_size} is smaller than one patch of {name} "
                         f"({embed.patch_size[0]} pixels)")
    shape = (embed.proj.in_channels, *embed.img_size)
    described = (f"{args.num_samples} random images {'×'.join(map(str, shape))}, standard normal "
                 f"pixels, seed {args.seed} (the model's weights are random too)")
    return models, lambda: image_batches(args.num_samples, args.batch_size, shape, args.seed), \
        described
