"""The claims file: which papers' claims are tested, by which comparisons, and how.

A claims file is a YAML list of claims (``experiments/claims.yaml``). Each claim names the
comparisons that test it (``settings``: result directories written by ``filterformer compare``)
and the rows that get a verdict (``tests``: a method, a compared metric, the paper's figure, and
the direction the paper claims); a claim whose comparisons have not all run yet says so
(``pending: true``). :func:`load_claims` reads and checks it; every bad key or value
is a ValueError naming the claim, the key and what is valid.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from ..training.config_files import load_yaml
from .comparisons import compared_keys
from .verdicts import EXPECTATIONS, MARGIN_EXPECTATIONS

__all__ = [
    "CLAIM_KEYS",
    "EXPECTATIONS",
    "FIGURE_KINDS",
    "Claim",
    "ClaimFigure",
    "ClaimTest",
    "Setting",
    "load_claims",
    "parse_claims",
]

#: The kinds of key figure a claim may have.
FIGURE_KINDS = ("file", "trend", "layers")

#: Keys of a claim: required ones first, then optional ones.
CLAIM_KEYS = ("id", "title", "papers", "claim", "settings", "tests", "setup", "tuning", "figure",
              "pending")
_CLAIM_REQUIRED = ("id", "title", "papers", "claim", "settings", "tests")
_SETTING_KEYS, _SETTING_REQUIRED = ("results", "label"), ("results",)
_TEST_KEYS = ("method", "metric", "paper", "expect", "settings", "versus", "interaction",
              "margin", "paper_effect")
_TEST_REQUIRED = ("method", "metric", "paper", "expect")
_TREND_KEYS, _TREND_REQUIRED = ("x", "x_label", "group", "metrics"), ("x", "metrics")
#: A claim id becomes part of figure file names and of the document's anchors.
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")


@dataclass(frozen=True)
class Setting:
    """One comparison of a claim.

    Attributes:
        results: its results directory, relative to the results root (``c3_japanese_vowels``).
        label: its name in the document (default: ``results``).
    """

    results: str
    label: str


@dataclass(frozen=True)
class ClaimTest:
    """A row of a claim that gets a verdict.

    Attributes:
        method: a method name of the comparison(s).
        metric: a key of the method's ``difference`` in ``results.json`` (``test_accuracy``).
        paper: the paper's figure(s), as the claims file quotes them.
        expect: one of :data:`EXPECTATIONS`: what the paper claims of ``method − baseline``.
        settings: the ``results`` of the settings this row is judged on (all the claim's by
            default), in the claim's order.
        versus: None to compare the method with its comparison's baseline; or another setting
            of the claim (its ``results``), to compare the method with itself there, seed by
            seed (``expect`` then speaks of ``setting − versus``: e.g. softmax at depth 16
            against depth 4).
        interaction: with ``versus``: compare ``method − baseline`` in the row's setting with
            ``method − baseline`` in ``versus``, seed by seed (the difference of differences;
            ``expect`` ``better``: the method gains more in the row's setting).
        margin: for ``same`` and ``not worse``: the difference (> 0, in the metric's units as
            ``results.json`` holds it: accuracy 0.01 is 1 pp) that still counts as no worse or
            the same; None: no margin stated (such a row supports nothing).
        paper_effect: the paper's own ``method − baseline`` on the metric, in the same units
            and orientation (None: the paper gives none comparable).
    """

    method: str
    metric: str
    paper: str
    expect: str
    settings: tuple[str, ...]
    versus: str | None = None
    margin: float | None = None
    paper_effect: float | None = None
    interaction: bool = False


@dataclass(frozen=True)
class ClaimFigure:
    """A claim's key figure.

    Attributes:
        kind: one of :data:`FIGURE_KINDS`: ``file`` (a figure compare wrote, relative to the
            first setting's results directory), ``trend`` (metrics against a value that changes
            across the settings) or ``layers`` (token cosine similarity per layer).
        file: the figure's path, for ``file``.
        x: for ``trend``, the dotted path of the x value in each ``results.json``
            (``budget.model.depth``).
        x_label: for ``trend``, the x axis's label (by default ``x`` itself).
        group: for ``trend``, an optional dotted path whose value separates lines (line style).
        metrics: for ``trend``, the run-record keys drawn, one panel each.
    """

    kind: str
    file: str | None = None
    x: str | None = None
    x_label: str | None = None
    group: str | None = None
    metrics: tuple[str, ...] = ()


@dataclass(frozen=True)
class Claim:
    """One claim of the papers, and how this project tests it.

    Attributes:
        id: a short unique name (``C3``).
        title: the section heading.
        papers: where the paper's numbers come from.
        claim: the claim in words, with the paper's numbers.
        settings: the comparisons that test it (at least one).
        tests: the rows that get a verdict (at least one).
        setup: our setup in words, for what ``results.json`` does not say (or None).
        tuning: the results directories of the baseline's hyperparameter selection (one per
            task when the settings' tasks differ; empty: none). The claims file gives one
            directory or a list.
        figure: the key figure (or None).
        pending: whether the claim's comparisons may not have run yet: a missing ``results`` or
            ``tuning`` directory is then reported as not run yet, and otherwise it is an error
            (default False).
    """

    id: str
    title: str
    papers: str
    claim: str
    settings: tuple[Setting, ...]
    tests: tuple[ClaimTest, ...]
    setup: str | None = None
    tuning: tuple[str, ...] = ()
    figure: ClaimFigure | None = None
    pending: bool = False


def _check_keys(data: Any, valid: Sequence[str], required: Sequence[str], where: str) -> None:
    if not isinstance(data, dict):
        raise ValueError(f"{where} must be a mapping with keys {', '.join(valid)}; got "
                         f"{data!r}")
    unknown = sorted(str(k) for k in set(data) - set(valid))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {', '.join(unknown)}; valid keys: "
                         f"{', '.join(valid) or '(none)'}")
    missing = [k for k in required if k not in data]
    if missing:
        raise ValueError(f"{where}: missing key(s) {', '.join(missing)}; required keys: "
                         f"{', '.join(required)}")


def _text(data: dict[str, Any], key: str, where: str) -> str:
    value = data[key]
    if not isinstance(value, str) or not value.strip():
        hint = " (quote it, so that it is kept as written)" if key == "paper" else ""
        raise ValueError(f"{where}: '{key}' must be a non-empty string{hint}; got {value!r}")
    return value.strip()


def _optional_text(data: dict[str, Any], key: str, where: str) -> str | None:
    return _text(data, key, where) if data.get(key) is not None else None


def _results_dir(value: Any, where: str) -> str:
    """A results directory: a relative path inside the results root."""
    path = PurePosixPath(value) if isinstance(value, str) and value.strip() else None
    if path is None or path.is_absolute() or ".." in path.parts or "\\" in value:
        raise ValueError(f"{where} must be a directory relative to the results root, without "
                         f"'..' (e.g. c3_japanese_vowels); got {value!r}")
    return str(path)


def _list(data: dict[str, Any], key: str, where: str) -> list[Any]:
    value = data[key]
    if not isinstance(value, list) or not value:
        raise ValueError(f"{where}: '{key}' must be a non-empty list; got {value!r}")
    return value


def _number(data: dict[str, Any], key: str, where: str, *, positive: bool) -> float | None:
    """An optional finite number (``positive``: > 0), as a float."""
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or (positive and value <= 0):
        kind = "a finite number > 0" if positive else "a finite number"
        raise ValueError(f"{where}: '{key}' must be {kind}, in the metric's units as results.json "
                         f"holds it (accuracy 0.01 is 1 pp); got {value!r}")
    return float(value)


def _setting(data: Any, where: str) -> Setting:
    _check_keys(data, _SETTING_KEYS, _SETTING_REQUIRED, where)
    results = _results_dir(data["results"], f"{where}.results")
    label = _optional_text(data, "label", where) or results
    return Setting(results, label)


def _test(data: Any, where: str, settings: Sequence[str]) -> ClaimTest:
    _check_keys(data, _TEST_KEYS, _TEST_REQUIRED, where)
    expect = data["expect"]
    if expect not in EXPECTATIONS:
        raise ValueError(f"{where}: 'expect' must be one of {', '.join(EXPECTATIONS)}; got "
                         f"{expect!r}")
    chosen = settings
    if data.get("settings") is not None:
        named = _list(data, "settings", where)
        unknown = [s for s in named if s not in settings]
        if unknown:
            raise ValueError(f"{where}: 'settings' names {unknown}, not among the claim's "
                             f"settings: {', '.join(settings)}")
        chosen = tuple(s for s in settings if s in named)
    versus = data.get("versus")
    if versus is not None:
        if versus not in settings:
            raise ValueError(f"{where}: 'versus' must be one of the claim's settings: "
                             f"{', '.join(settings)}; got {versus!r}")
        chosen = tuple(s for s in chosen if s != versus)
        if not chosen:
            raise ValueError(f"{where}: 'versus' {versus!r} leaves no setting to compare with it")
    interaction = False if data.get("interaction") is None else data["interaction"]
    if not isinstance(interaction, bool):
        raise ValueError(f"{where}: 'interaction' must be true or false; got {interaction!r}")
    if interaction and versus is None:
        raise ValueError(f"{where}: 'interaction' compares method − baseline in the row's "
                         "settings with method − baseline in its 'versus' setting, so it needs "
                         "'versus' (another of the claim's settings)")
    metric = _text(data, "metric", where)
    if metric not in compared_keys():
        raise ValueError(f"{where}: 'metric' must be a key compare compares, one of "
                         f"{', '.join(compared_keys())}; got {metric!r}")
    margin = _number(data, "margin", where, positive=True)
    if margin is not None and expect not in MARGIN_EXPECTATIONS:
        raise ValueError(f"{where}: 'margin' applies only to expect "
                         f"{' or '.join(MARGIN_EXPECTATIONS)}; this row expects {expect!r}")
    return ClaimTest(_text(data, "method", where), metric, _text(data, "paper", where), expect,
                     tuple(chosen), versus, margin,
                     _number(data, "paper_effect", where, positive=False), interaction)


def _figure(data: Any, where: str) -> ClaimFigure:
    _check_keys(data, FIGURE_KINDS, (), where)
    kinds = [k for k in FIGURE_KINDS if k in data]
    if len(kinds) != 1:
        raise ValueError(f"{where} must have exactly one of the keys {', '.join(FIGURE_KINDS)}; "
                         f"got {', '.join(kinds) or 'none'}")
    kind = kinds[0]
    if kind == "file":
        return ClaimFigure("file", file=_results_dir(data["file"], f"{where}.file"))
    if kind == "layers":
        _check_keys(data["layers"] or {}, (), (), f"{where}.layers")
        return ClaimFigure("layers")
    trend = data["trend"]
    _check_keys(trend, _TREND_KEYS, _TREND_REQUIRED, f"{where}.trend")
    metrics = _list(trend, "metrics", f"{where}.trend")
    if not all(isinstance(m, str) and m for m in metrics):
        raise ValueError(f"{where}.trend: 'metrics' must be run-record keys (strings); got "
                         f"{metrics!r}")
    return ClaimFigure("trend", x=_text(trend, "x", f"{where}.trend"),
                       x_label=_optional_text(trend, "x_label", f"{where}.trend"),
                       group=_optional_text(trend, "group", f"{where}.trend"),
                       metrics=tuple(metrics))


def _claim(data: Any, index: int) -> Claim:
    where = f"claim {data.get('id', f'#{index + 1}')}" if isinstance(data, dict) \
        else f"claim #{index + 1}"
    _check_keys(data, CLAIM_KEYS, _CLAIM_REQUIRED, where)
    claim_id = data["id"]
    if not isinstance(claim_id, str) or not _ID.fullmatch(claim_id):
        raise ValueError(f"{where}: 'id' must be letters, digits, '_' or '-' (e.g. C3); got "
                         f"{claim_id!r}")
    settings = tuple(_setting(s, f"{where}, settings[{i}]")
                     for i, s in enumerate(_list(data, "settings", where)))
    names = [s.results for s in settings]
    if len(set(names)) != len(names):
        raise ValueError(f"{where}: 'settings' repeats a results directory: {names}")
    tests = tuple(_test(t, f"{where}, tests[{i}]", names)
                  for i, t in enumerate(_list(data, "tests", where)))
    pending = data.get("pending", False)
    if not isinstance(pending, bool):
        raise ValueError(f"{where}: 'pending' must be true or false; got {pending!r}")
    tuning = data.get("tuning")
    tuning = [] if tuning is None else [tuning] if isinstance(tuning, str) else _list(
        data, "tuning", where)
    return Claim(
        id=claim_id,
        title=_text(data, "title", where),
        papers=_text(data, "papers", where),
        claim=_text(data, "claim", where),
        settings=settings,
        tests=tests,
        setup=_optional_text(data, "setup", where),
        tuning=tuple(_results_dir(t, f"{where}.tuning") for t in tuning),
        figure=None if data.get("figure") is None else _figure(data["figure"],
                                                                f"{where}.figure"),
        pending=pending,
    )


def parse_claims(data: Any) -> list[Claim]:
    """The claims of a claims file's content (a list of mappings, as YAML reads it).

    Raises:
        ValueError: naming the claim, the key and the valid keys or values, for an unknown or
            missing key, a value of the wrong kind, a repeated id, a test row whose settings are
            not the claim's.
    """
    if not isinstance(data, list) or not data:
        raise ValueError(f"a claims file must be a non-empty list of claims (mappings with keys "
                         f"{', '.join(CLAIM_KEYS)}); got {type(data).__name__}")
    claims = [_claim(item, i) for i, item in enumerate(data)]
    ids = [c.id for c in claims]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise ValueError(f"claim ids must be unique; repeated: {', '.join(repeated)}")
    return claims


def load_claims(path: str | Path) -> list[Claim]:
    """Read and check a claims file (YAML); see :func:`parse_claims`."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"claims file {path} " + ("is not a file" if path.exists()
                                                    else "does not exist"))
    try:
        data = load_yaml(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        raise ValueError(f"claims file {path} is not UTF-8 text ({err.reason} at byte "
                         f"{err.start})") from None
    except OSError as err:
        raise ValueError(f"claims file {path} cannot be read: {err.strerror or err}") from None
    except yaml.YAMLError as err:
        raise ValueError(f"claims file {path} is not valid YAML: {err}") from None
    try:
        return parse_claims(data)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None
