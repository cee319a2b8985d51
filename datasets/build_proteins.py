"""Rebuild the ``proteins`` dataset files (see datasets/README.md).

Copies a fixed selection of single-chain protein structures out of the
MDAnalysisTests source distribution into ``datasets/proteins/*.pdb.gz`` (files
are copied byte for byte, plain-text ones gzip-compressed) and writes the index
``datasets/proteins.csv`` (title, file, pdb_id, chain, heavy_atoms, source), which
:func:`mgkflow.datasets.proteins` (the loader, in :mod:`mgkflow.datasets.protein_set`) reads.

Selection: the 49 single-chain files of ``MDAnalysisTests/data/dssp/`` (all
except ``1mr1D_failing`` and ``wrong_hydrogens``, which are test fixtures),
sorted by heavy-atom count, of which 36 evenly spaced by rank are kept (smallest
and largest included), plus four single-chain structures from elsewhere in the
sdist that widen the size range (:data:`EXTRAS`).

Usage::

    pip download --no-deps --no-binary :all: mdanalysistests -d /tmp/mda
    tar xzf /tmp/mda/mdanalysistests-*.tar.gz -C /tmp/mda
    python datasets/build_proteins.py /tmp/mda/mdanalysistests-2.11.0
"""

from __future__ import annotations

import argparse
import csv
import gzip
import shutil
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
OUT_DIR = HERE / "proteins"
INDEX = HERE / "proteins.csv"
N_DSSP = 36
EXCLUDE = {"1mr1D_failing", "wrong_hydrogens"}
# (source path under MDAnalysisTests/data, title, PDB id, chain as stored in the file)
EXTRAS = [
    ("5a7u.pdb", "5a7uA", "5A7U", "A"),  # ADR1 zinc-finger domain, cryo-EM (with its Zn ion)
    ("cobrotoxin_dry_neutral_0.pdb", "cobrotoxin", "", ""),  # MD frame of cobrotoxin with Na+/Cl- ions
    ("adk_open.pdb", "adk_open", "4AKE", ""),  # adenylate kinase, open state (CHARMM naming, no chain id)
    ("merge/2zmm/protein.pdb", "2zmmA", "2ZMM", "A"),  # protein part of PDB 2ZMM
]


def _copy_gz(src: Path, dst: Path) -> None:
    if src.suffix == ".gz":
        shutil.copyfile(src, dst)
    else:
        with open(src, "rb") as fi, gzip.GzipFile(dst, "wb", mtime=0) as fo:
            shutil.copyfileobj(fi, fo)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sdist", type=Path, help="unpacked mdanalysistests sdist (holds MDAnalysisTests/)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(HERE.parent))
    from mgkflow.io.pdb_parser import parse_pdb_atoms

    data = args.sdist / "MDAnalysisTests" / "data"
    dssp = []
    for f in sorted((data / "dssp").glob("*.pdb.gz")):
        stem = f.name[: -len(".pdb.gz")]
        if stem in EXCLUDE:
            continue
        dssp.append((len(parse_pdb_atoms(f)["coords"]), stem, f))
    dssp.sort(key=lambda t: (t[0], t[1]))
    picks = sorted(set(np.rint(np.linspace(0, len(dssp) - 1, N_DSSP)).astype(int).tolist()))
    rows = []
    for k in picks:
        n, stem, f = dssp[k]
        rows.append((stem, f, stem[:4].upper(), stem[4:]))
    for rel, title, pdb_id, chain in EXTRAS:
        rows.append((title, data / rel, pdb_id, chain))
    rows.sort(key=lambda r: r[0])
    if OUT_DIR.exists():
        for old in OUT_DIR.glob("*.pdb.gz"):
            old.unlink()
    OUT_DIR.mkdir(exist_ok=True)
    with open(INDEX, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["title", "file", "pdb_id", "chain", "heavy_atoms", "source"])
        for title, src, pdb_id, chain in rows:
            dst = OUT_DIR / f"{title}.pdb.gz"
            _copy_gz(src, dst)
            n = len(parse_pdb_atoms(dst)["coords"])
            source = f"MDAnalysisTests/data/{src.relative_to(data)}"
            w.writerow([title, f"proteins/{dst.name}", pdb_id, chain, n, source])
    sizes = sum(p.stat().st_size for p in OUT_DIR.glob("*.pdb.gz"))
    print(f"wrote {len(rows)} structures ({sizes / 1e6:.2f} MB) and {INDEX}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
