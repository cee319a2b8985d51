"""Data files of the mgkflow built-in datasets (read by :mod:`mgkflow.datasets`).

This package holds data only: ``drugs.csv`` and ``drugs_graphs.npz`` (ChEMBL
approved drugs), ``proteins.csv`` and ``proteins/*.pdb.gz`` (protein
structures), and the scripts that rebuild them. See ``README.md`` here for
provenance and licences.
"""
