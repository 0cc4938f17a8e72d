"""Datasets and tasks that work offline: LRA ListOps and Pathfinder, UEA time series, images, text
and molecules, behind one registry (:func:`load_task`) and one result type (:class:`TaskData`).

Heavy optional libraries (transformers, RDKit, scikit-learn, rdata) are imported only by the tasks
that need them; a missing source raises :class:`MissingSourceError` naming the package or path that
provides it and the command that installs it.
"""

from .b3db import B3DB_TABLES, load_b3db, read_b3db
from .cache import CACHE_ENV_VAR, cache_root, sources_dir
from .datasets import (
    IGNORE_INDEX,
    PAD_ID,
    ItemDataset,
    LanguageModelingDataset,
    SequenceDataset,
    collate_sequences,
)
from .idx import parse_idx, read_idx
from .images import load_digits_task, load_fashion_mnist, patchify, read_fashion_mnist
from .listops import evaluate_listops, generate_listops, load_listops
from .molecules import molecule_graphs, smiles_to_graph
from .pathfinder import DRAW_THRESHOLD, PathfinderImages, generate_pathfinder, load_pathfinder
from .sentiment import load_sentiment, load_sentiment_bytes, read_movie_snippets
from .sources import MissingSourceError
from .splits import SPLIT_SEED, carve_validation, split_indices
from .task import GRAPH_KINDS, TASK_KINDS, TaskData
from .task_registry import TASKS, load_task, task_options
from .text import load_text_lm, read_austen, read_corpus, read_text_path
from .ts_format import TimeSeriesCases, parse_ts, read_ts
from .uea import load_uea, read_uea

__all__ = [
    "B3DB_TABLES",
    "CACHE_ENV_VAR",
    "DRAW_THRESHOLD",
    "GRAPH_KINDS",
    "IGNORE_INDEX",
    "PAD_ID",
    "SPLIT_SEED",
    "TASKS",
    "TASK_KINDS",
    "ItemDataset",
    "LanguageModelingDataset",
    "MissingSourceError",
    "PathfinderImages",
    "SequenceDataset",
    "TaskData",
    "TimeSeriesCases",
    "cache_root",
    "carve_validation",
    "collate_sequences",
    "evaluate_listops",
    "generate_listops",
    "generate_pathfinder",
    "load_b3db",
    "load_digits_task",
    "load_fashion_mnist",
    "load_listops",
    "load_pathfinder",
    "load_sentiment",
    "load_sentiment_bytes",
    "load_task",
    "load_text_lm",
    "load_uea",
    "molecule_graphs",
    "parse_idx",
    "parse_ts",
    "patchify",
    "read_austen",
    "read_b3db",
    "read_corpus",
    "read_fashion_mnist",
    "read_idx",
    "read_movie_snippets",
    "read_text_path",
    "read_ts",
    "read_uea",
    "smiles_to_graph",
    "sources_dir",
    "split_indices",
    "task_options",
]
