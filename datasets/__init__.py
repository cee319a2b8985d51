"""Data files of the mgkflow built-in datasets (read by :mod:`mgkflow.datasets`).

This package holds data only: ``drugs.csv`` and ``drugs_graphs.npz`` (ChEMBL
approved drugs), ``proteins.csv`` and ``proteins/*.pdb.gz`` (protein
structures), ``freesolv.csv``/``solubility.csv`` (and the other property sets, ``moses.csv``
(a MOSES subset)) and their ``*_graphs.npz``,
and the scripts that *build* them (``build_*.py``). It ships in the wheel as
``mgkflow.data``, never as a top-level ``datasets`` package. The code that
*loads* the files is the package :mod:`mgkflow.datasets` (one module per
dataset family). See ``README.md`` here for provenance and licences.
"""
