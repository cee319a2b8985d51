"""Build the shipped MOSES subset: ``datasets/moses.csv`` and ``datasets/moses_graphs.npz``.

See datasets/README.md for provenance and licence (MOSES, MIT).

Reads ``train.csv.gz`` of the MOSES training split (1,584,663 drug-like SMILES; the file
``moses/dataset/data/train.csv.gz`` of the ``molsets`` 0.3.1 wheel), draws ``--n`` rows at random
(``numpy.random.default_rng(--seed).choice`` without replacement, kept in file order) and writes

* ``datasets/moses.csv``: ``moses_index,smiles,logp,tpsa,qed``: the 0-based row of the molecule in
  ``train.csv.gz`` (header not counted), its SMILES as written there, and three labels computed
  by RDKit as **stand-ins for expensive labels** (the kind a screening campaign would measure or
  compute at cost): Crippen's logP (``Crippen.MolLogP``), the topological polar surface area
  (``rdMolDescriptors.CalcTPSA``, Å²) and QED (``QED.qed``), each rounded to 4 decimals
  (:func:`mgkflow.datasets.moses_set.stand_in_labels` computes them the same way);
* ``datasets/moses_graphs.npz``: the molecules' graphs, as ``build_property_sets.py`` writes them
  (``Graph.from_smiles(smiles, extended=True)``; layout in that script).

Usage (needs RDKit; ``pip download`` fetches the wheel alone, not its dependencies, torch among them)::

    pip download --no-deps molsets==0.3.1 -d /tmp/molsets
    unzip -o /tmp/molsets/molsets-0.3.1-py3-none-any.whl 'moses/dataset/data/*' -d /tmp/molsets/x
    python datasets/build_moses.py /tmp/molsets/x/moses/dataset/data/train.csv.gz
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MOSES_CSV = HERE / "moses.csv"
MOSES_NPZ = HERE / "moses_graphs.npz"
#: SHA-256 of molsets 0.3.1's moses/dataset/data/train.csv.gz (the file the subset was drawn from).
TRAIN_SHA256 = "786f0313aa6b9ba5514df685f885742a70ea8d86f1a4fa48115f7f80a634265c"


def subset_csv(train_gz: Path, n: int, seed: int, out: Path = MOSES_CSV) -> dict[str, object]:
    sys.path.insert(0, str(HERE.parent))
    from mgkflow.datasets.moses_set import stand_in_labels

    digest = hashlib.sha256(train_gz.read_bytes()).hexdigest()
    with gzip.open(train_gz, "rt", encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh)
        if next(reader) != ["SMILES"]:
            raise SystemExit(f"{train_gz}: expected the MOSES layout (one column, header SMILES)")
        smiles = [row[0] for row in reader]
    idx = np.sort(np.random.default_rng(seed).choice(len(smiles), size=n, replace=False))
    with open(out, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["moses_index", "smiles", "logp", "tpsa", "qed"])
        for i in idx:
            labels = stand_in_labels(smiles[i])  # raises on a SMILES RDKit cannot parse (none in MOSES)
            w.writerow([int(i), smiles[i], *(f"{labels[k]:.4f}" for k in ("logp", "tpsa", "qed"))])
    return {"rows_in_source": len(smiles), "kept": n, "source_sha256": digest, "matches_0.3.1": digest == TRAIN_SHA256}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("train_gz", type=Path, nargs="?", help="MOSES train.csv.gz (omit: graphs only, from moses.csv)")
    ap.add_argument("--n", type=int, default=10_000, help="molecules to keep (default 10,000)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the random draw (default 0)")
    args = ap.parse_args(argv)
    if args.train_gz is not None:
        print(subset_csv(args.train_gz, args.n, args.seed), "->", MOSES_CSV)
    sys.path.insert(0, str(HERE))
    import build_property_sets as bps

    bps.NPZ[MOSES_CSV] = MOSES_NPZ  # the same graph layout as the property sets
    print(bps.build_graphs(MOSES_CSV), "->", MOSES_NPZ)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
