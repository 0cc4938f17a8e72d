"""Molecules as graphs: B3DB blood-brain-barrier permeability (BBB+ / BBB-) from SMILES.

B3DB (Meng et al., 2021; CC0) ships in the PyPI package ``qc-b3db``:
``B3DB/B3DB_classification.tsv`` has 7,807 molecules with a SMILES string and a BBB+/BBB- label.
RDKit turns each SMILES into a graph of heavy atoms and bonds, every bond once per direction, with
one-hot numeric features (see :data:`NODE_FEATURES` and :data:`EDGE_FEATURES`). A graph counts
``num_nodes + num_edges`` tokens for Graph-Bridge. There are no official splits: validation and
test are carved with the fixed split seed, stratified by label.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from ..graphs import Graph, collate_graphs
from .cache import cache_root, cached_arrays
from .datasets import ItemDataset
from .sources import MissingSourceError, find_package_dir, require_module
from .splits import check_split_fractions, three_way_split
from .task import TaskData

if TYPE_CHECKING:
    from rdkit import Chem

__all__ = [
    "ATOM_SYMBOLS",
    "EDGE_FEATURES",
    "NODE_FEATURES",
    "load_b3db",
    "read_b3db",
    "smiles_to_graph",
]

ATOM_SYMBOLS = ("C", "N", "O", "S", "F", "Cl", "Br", "I", "P", "B", "Si", "Se")  # then "other"
_DEGREES = 6  # 0..5, larger clipped to 5
_CHARGES = (-2, -1, 0, 1, 2)  # clipped to this range
_HYDROGENS = 5  # 0..4, larger clipped to 4
_HYBRIDISATIONS = ("SP", "SP2", "SP3", "SP3D", "SP3D2")  # then "other"
_BOND_TYPES = ("SINGLE", "DOUBLE", "TRIPLE", "AROMATIC")
# Feature groups, each one-hot over its categories; a two-category group is a single 0/1 column.
# nodes: element, degree, formal charge, hydrogens, hybridisation, aromatic, in ring
_NODE_GROUPS = (len(ATOM_SYMBOLS) + 1, _DEGREES, len(_CHARGES), _HYDROGENS,
                len(_HYBRIDISATIONS) + 1, 2, 2)
# edges: bond type, conjugated, in ring
_EDGE_GROUPS = (len(_BOND_TYPES), 2, 2)
NODE_FEATURES = sum(1 if size == 2 else size for size in _NODE_GROUPS)
EDGE_FEATURES = sum(1 if size == 2 else size for size in _EDGE_GROUPS)
QC_B3DB_PACKAGE = "qc-b3db"
_FEATURES_VERSION = 1  # bump when the features change, so cached graphs are rebuilt


def _atom_codes(atom: Chem.Atom) -> list[int]:
    """The atom's category in each of the node feature groups (see ``_NODE_GROUPS``)."""
    symbol = atom.GetSymbol()
    hybridisation = str(atom.GetHybridization())
    return [
        ATOM_SYMBOLS.index(symbol) if symbol in ATOM_SYMBOLS else len(ATOM_SYMBOLS),
        min(atom.GetDegree(), _DEGREES - 1),
        min(max(atom.GetFormalCharge(), _CHARGES[0]), _CHARGES[-1]) - _CHARGES[0],
        min(atom.GetTotalNumHs(), _HYDROGENS - 1),
        (_HYBRIDISATIONS.index(hybridisation) if hybridisation in _HYBRIDISATIONS
         else len(_HYBRIDISATIONS)),
        int(atom.GetIsAromatic()),
        int(atom.IsInRing()),
    ]


def _one_hot(codes: np.ndarray, groups: tuple[int, ...]) -> np.ndarray:
    """``(n, len(groups))`` category codes to ``(n, features)`` one-hot columns, group by group."""
    columns = []
    for j, size in enumerate(groups):
        if size == 2:
            columns.append(codes[:, j : j + 1].astype(np.float32))
        else:
            columns.append(np.eye(size, dtype=np.float32)[codes[:, j]])
    return np.concatenate(columns, axis=1)


def _parse_smiles(smiles: str) -> Chem.Mol | None:
    from rdkit import Chem

    molecule = Chem.MolFromSmiles(smiles)
    if molecule is None:
        # A few entries break RDKit's valence rules (e.g. a 5-valent carbon); their structure
        # is still clear, so sanitise everything except the valence check.
        molecule = Chem.MolFromSmiles(smiles, sanitize=False)
        if molecule is None:
            return None
        molecule.UpdatePropertyCache(strict=False)
        flags = Chem.SanitizeFlags.SANITIZE_ALL ^ Chem.SanitizeFlags.SANITIZE_PROPERTIES
        if Chem.SanitizeMol(molecule, flags, catchErrors=True) != Chem.SanitizeFlags.SANITIZE_NONE:
            return None
    return molecule if molecule.GetNumAtoms() else None


def _molecule_codes(smiles: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Atom codes ``(n, 7)``, directed bonds ``(2, 2b)`` and bond codes ``(2b, 3)``, or None."""
    molecule = _parse_smiles(smiles)
    if molecule is None:
        return None
    atoms = np.array([_atom_codes(a) for a in molecule.GetAtoms()], dtype=np.int64)
    pairs, bond_codes = [], []
    for bond in molecule.GetBonds():
        kind = str(bond.GetBondType())
        codes = [_BOND_TYPES.index(kind) if kind in _BOND_TYPES else 0,
                 int(bond.GetIsConjugated()), int(bond.IsInRing())]
        i, j = bond.GetBeginAtomIdx(), bond.GetEndAtomIdx()
        pairs += [(i, j), (j, i)]
        bond_codes += [codes, codes]
    edge_index = np.array(pairs, dtype=np.int64).reshape(-1, 2).T
    return atoms, edge_index, np.array(bond_codes, dtype=np.int64).reshape(-1, len(_EDGE_GROUPS))


def _quiet_rdkit() -> contextlib.AbstractContextManager:
    """RDKit prints each SMILES it rejects; the valence fallback handles those, so mute it."""
    require_module("rdkit", "rdkit")
    from rdkit import RDLogger

    @contextlib.contextmanager
    def muted() -> Iterator[None]:
        RDLogger.DisableLog("rdApp.*")
        try:
            yield
        finally:
            RDLogger.EnableLog("rdApp.*")

    return muted()


def _graph(atoms: np.ndarray, edge_index: np.ndarray, bonds: np.ndarray,
           label: int | float | None) -> Graph:
    return Graph(
        torch.from_numpy(_one_hot(atoms, _NODE_GROUPS)),
        torch.from_numpy(np.ascontiguousarray(edge_index)),
        torch.from_numpy(_one_hot(bonds, _EDGE_GROUPS)),
        label,
    )


def smiles_to_graph(smiles: str, label: int | float | None = None) -> Graph | None:
    """A molecule's heavy-atom graph; None when RDKit cannot read the SMILES.

    Returns:
        :class:`~filterformer.graphs.Graph` with ``node_features`` ``(n, NODE_FEATURES)``,
        ``edge_index`` ``(2, 2·bonds)`` (each bond in both directions) and ``edge_features``
        ``(2·bonds, EDGE_FEATURES)``.
    """
    with _quiet_rdkit():
        codes = _molecule_codes(smiles)
    return None if codes is None else _graph(*codes, label)


def read_b3db(path: str | os.PathLike | None = None) -> list[tuple[str, int]]:
    """B3DB's classification set as ``(SMILES, label)`` rows, label 1 for BBB+.

    Args:
        path: a TSV with ``SMILES`` and ``BBB+/BBB-`` columns; default the file in ``qc-b3db``.
    """
    if path is None:
        package_dir = find_package_dir("B3DB")
        if package_dir is None or not (package_dir / "B3DB_classification.tsv").is_file():
            raise MissingSourceError(
                "B3DB_classification.tsv",
                f"the PyPI package {QC_B3DB_PACKAGE}",
                f"pip install {QC_B3DB_PACKAGE}",
            )
        path = package_dir / "B3DB_classification.tsv"
    text = Path(path).expanduser().read_text(encoding="utf-8")
    rows = []
    for record in csv.DictReader(io.StringIO(text), delimiter="\t"):
        label = record["BBB+/BBB-"].strip()
        if label not in ("BBB+", "BBB-"):
            raise ValueError(f"BBB+/BBB- column holds {label!r}; valid: 'BBB+', 'BBB-'")
        rows.append((record["SMILES"].strip(), int(label == "BBB+")))
    return rows


def _featurise(rows: list[tuple[str, int]]) -> dict[str, np.ndarray]:
    """All molecules' codes, concatenated, with offsets; unreadable SMILES are listed by row."""
    atoms, edges, bonds, labels, unreadable = [], [], [], [], []
    with _quiet_rdkit():
        for row, (smiles, label) in enumerate(rows):
            codes = _molecule_codes(smiles)
            if codes is None:
                unreadable.append(row)
                continue
            atoms.append(codes[0])
            edges.append(codes[1])
            bonds.append(codes[2])
            labels.append(label)
    return {
        "atoms": np.concatenate(atoms),
        "atom_offsets": np.cumsum([0] + [len(a) for a in atoms]),
        "edges": np.concatenate(edges, axis=1),
        "bonds": np.concatenate(bonds),
        "edge_offsets": np.cumsum([0] + [e.shape[1] for e in edges]),
        "labels": np.array(labels, dtype=np.int64),
        "unreadable": np.array(unreadable, dtype=np.int64),
    }


def _graphs_from_arrays(arrays: dict[str, np.ndarray]) -> list[Graph]:
    node_at, edge_at = arrays["atom_offsets"], arrays["edge_offsets"]
    return [
        _graph(arrays["atoms"][node_at[i] : node_at[i + 1]],
               arrays["edges"][:, edge_at[i] : edge_at[i + 1]],
               arrays["bonds"][edge_at[i] : edge_at[i + 1]], int(label))
        for i, label in enumerate(arrays["labels"])
    ]


def load_b3db(
    *,
    path: str | os.PathLike | None = None,
    seed: int = 0,
    num_train: int | None = None,
    validation_fraction: float = 0.1,
    test_fraction: float = 0.1,
    cache_dir: str | os.PathLike | None = None,
) -> TaskData:
    """B3DB classification as atom/bond graphs, batched as :class:`~filterformer.graphs.GraphBatch`.

    Args:
        path: a TSV with ``SMILES`` and ``BBB+/BBB-`` columns; default the one in ``qc-b3db``.
        seed: draws the ``num_train`` subset.
        num_train: keep only this many training molecules; None keeps all.
        validation_fraction: share of the molecules held out for model selection.
        test_fraction: share of the molecules held out for the final test.
        cache_dir: cache root; the featurised graphs are stored there after the first load.
    """
    check_split_fractions(validation_fraction, test_fraction)
    rows = read_b3db(path)
    digest = hashlib.sha1(repr(rows).encode()).hexdigest()[:16]
    cache_path = cache_root(cache_dir) / "b3db" / f"b3db-graphs-v{_FEATURES_VERSION}-{digest}.npz"
    arrays = cached_arrays(cache_path, lambda: _featurise(rows))
    graphs = _graphs_from_arrays(arrays)
    unreadable = [rows[i][0] for i in arrays["unreadable"]]
    labels = np.array([g.label for g in graphs], dtype=np.int64)
    train, validation, test = three_way_split(
        labels, validation_fraction, test_fraction, num_train, seed
    )
    splits = {split: ItemDataset([graphs[i] for i in idx])
              for split, idx in {"train": train, "validation": validation, "test": test}.items()}
    return TaskData(
        name="b3db",
        kind="graph_classification",
        train=splits["train"],
        validation=splits["validation"],
        test=splits["test"],
        collate=collate_graphs,
        num_classes=2,
        vocab_size=None,
        input_dim=NODE_FEATURES,
        max_len=max(g.num_nodes + g.num_edges for g in graphs),
        metadata={"class_names": ["BBB-", "BBB+"], "num_molecules": len(rows),
                  "unreadable_smiles": unreadable, "node_features": NODE_FEATURES,
                  "edge_features": EDGE_FEATURES, "seed": seed},
    )
