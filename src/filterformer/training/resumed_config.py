"""The configuration a resumed run continues with: the one its checkpoint was saved with.

``filterformer train --config FILE --resume`` continues the run in the output directory as it was
started, whatever ``FILE`` says now about what it trains: the config file (or the defaults) locates
the run (its ``output_dir``) and gives the session's own keys
(:data:`~.run_config.SESSION_FIELDS`: progress, ``stop_after``, compile, …). Options given on
the command line are applied on top; any that would change what the run trains is refused with
the two ways out: resume without it, or start a new run in another directory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .checkpoint import check_same_config, config_differences, load_checkpoint
from .config_files import apply_overrides
from .run_config import SESSION_FIELDS, TrainConfig, run_identity

__all__ = ["ResumedConfig", "resumed_config"]


@dataclass(frozen=True)
class ResumedConfig:
    """What a resumed run continues with.

    Attributes:
        config: the run's saved configuration, with the session's options on top.
        checkpoint: the checkpoint it was read from (None when the output directory holds no
            checkpoint: the configuration asked for is then the run's, and resuming fails
            saying so).
        ignored: where the configuration asked for (config file, defaults) differs from the
            saved one, one ``key: saved …, asked …`` entry each; the saved values are kept.
    """

    config: TrainConfig
    checkpoint: Path | None = None
    ignored: tuple[str, ...] = ()


def resumed_config(asked: TrainConfig, overrides: Sequence[str] = ()) -> ResumedConfig:
    """The configuration the run in ``asked.output_dir`` resumes with.

    Args:
        asked: the configuration the command line builds (config file, defaults and
            ``overrides``); its ``output_dir`` is the run directory.
        overrides: the ``key=value`` options given on the command line (``--set``, and the
            flags that set keys such as ``progress=false``); applied on top of the saved
            configuration.

    Raises:
        ValueError: when an override changes what the saved run trains (naming the checkpoint,
            each differing key with both values, and the ways out), or the checkpoint cannot be
            read (:func:`~.checkpoint.load_checkpoint`).
    """
    checkpoint = Path(asked.output_dir) / "checkpoints" / "last.pt"
    if not checkpoint.is_file():
        return ResumedConfig(asked)
    saved = load_checkpoint(checkpoint, required=("config",))["config"]
    # The session's own keys (where the run lives now, progress, stop_after, …) are this
    # session's; what the run trains is the saved run's.
    session = {key: value for key, value in asked.to_dict().items() if key in SESSION_FIELDS}
    base = {**saved, **session}
    config = TrainConfig.from_dict(apply_overrides(base, overrides))
    check_same_config(
        run_identity(TrainConfig.from_dict(base).to_dict()), run_identity(config.to_dict()),
        checkpoint,
        hint="; to continue the saved run, resume without the options that change these keys; "
             "to train with them, start a new run in another directory (--output-dir DIR)",
    )
    ignored = config_differences(run_identity(config.to_dict()), run_identity(asked.to_dict()),
                                 labels=("saved", "asked"))
    return ResumedConfig(config, checkpoint, tuple(ignored))
