"""Molecules as graphs: SMILES to heavy-atom graphs with one-hot atom and bond features.

RDKit turns each SMILES into a graph of heavy atoms and bonds, every bond once per direction, with
one-hot numeric features (see :data:`NODE_FEATURES` and :data:`EDGE_FEATURES`). A graph counts
``num_nodes + num_edges`` tokens for Graph-Bridge. :func:`molecule_graphs` featurises a whole data
set once and caches it; the data sets themselves (B3DB) live in :mod:`.b3db`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch

from ..graphs import Graph
from .cache import cache_root, cached_arrays
from .sources import require_module

if TYPE_CHECKING:
    from rdkit import Chem

__all__ = [
    "ATOM_SYMBOLS",
    "EDGE_FEATURES",
    "NODE_FEATURES",
    "molecule_graphs",
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


def _featurise(smiles: Sequence[str]) -> dict[str, np.ndarray]:
    """All molecules' codes, concatenated, with offsets; unreadable SMILES are listed by row."""
    atoms, edges, bonds, unreadable = [], [], [], []
    with _quiet_rdkit():
        for row, text in enumerate(smiles):
            codes = _molecule_codes(text)
            if codes is None:
                unreadable.append(row)
                continue
            atoms.append(codes[0])
            edges.append(codes[1])
            bonds.append(codes[2])
    # An empty part keeps each array's shape when no SMILES is readable.
    no_atoms = np.zeros((0, len(_NODE_GROUPS)), dtype=np.int64)
    no_bonds = np.zeros((0, len(_EDGE_GROUPS)), dtype=np.int64)
    return {
        "atoms": np.concatenate([*atoms, no_atoms]),
        "atom_offsets": np.cumsum([0] + [len(a) for a in atoms]),
        "edges": np.concatenate([*edges, np.zeros((2, 0), dtype=np.int64)], axis=1),
        "bonds": np.concatenate([*bonds, no_bonds]),
        "edge_offsets": np.cumsum([0] + [e.shape[1] for e in edges]),
        "unreadable": np.array(unreadable, dtype=np.int64),
    }


def molecule_graphs(
    smiles: Sequence[str],
    targets: np.ndarray,
    *,
    name: str,
    cache_dir: str | os.PathLike | None = None,
) -> tuple[list[Graph], list[str]]:
    """The graphs of every readable molecule with its target, featurised once and cached.

    Args:
        smiles: ``M`` SMILES strings.
        targets: ``(M,)`` one per molecule: int64 class labels or float32 values; each graph's
            ``label`` is the Python number.
        name: the data set's name: its cache folder and file prefix under the cache root.
        cache_dir: cache root (:func:`~filterformer.data.cache.cache_root`).

    Returns:
        ``(graphs, unreadable)``: the graphs of the molecules RDKit reads, in row order, and the
        SMILES it could not read.
    """
    if len(targets) != len(smiles):
        raise ValueError(f"targets must have one value per SMILES ({len(smiles)}); got "
                         f"{len(targets)}")
    digest = hashlib.sha1(repr(list(smiles)).encode()).hexdigest()[:16]
    path = cache_root(cache_dir) / name / f"{name}-graphs-v{_FEATURES_VERSION}-{digest}.npz"
    arrays = cached_arrays(path, lambda: _featurise(smiles))
    readable = np.delete(np.arange(len(smiles)), arrays["unreadable"])
    node_at, edge_at = arrays["atom_offsets"], arrays["edge_offsets"]
    graphs = [
        _graph(arrays["atoms"][node_at[i] : node_at[i + 1]],
               arrays["edges"][:, edge_at[i] : edge_at[i + 1]],
               arrays["bonds"][edge_at[i] : edge_at[i + 1]], targets[row].item())
        for i, row in enumerate(readable)
    ]
    return graphs, [smiles[i] for i in arrays["unreadable"]]
