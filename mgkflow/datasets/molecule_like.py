"""Synthetic molecule-like graphs of any number and size (:func:`molecules`): a scale workload with no files."""

from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from ..graph import Graph
from ..io.csr import csr_from_edges
from . import _args
from ._args import MAX_GRAPHS, MAX_NODES

__all__ = ["molecules"]


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
    n_graphs = _args.count("molecules", "n_graphs", n_graphs, minimum=0, maximum=MAX_GRAPHS)
    seed = _args.seed("molecules", seed)
    min_atoms = _args.count("molecules", "min_atoms", min_atoms, minimum=3, maximum=MAX_NODES)
    max_atoms = _args.count("molecules", "max_atoms", max_atoms, minimum=3, maximum=MAX_NODES)
    if min_atoms > max_atoms:
        raise ParameterError(f"molecules: need 3 <= min_atoms <= max_atoms, got {min_atoms}, {max_atoms}")
    mean_atoms = _args.real("molecules", "mean_atoms", mean_atoms, minimum=0.0)
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
