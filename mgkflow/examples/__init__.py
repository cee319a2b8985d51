"""Runnable examples (``python -m mgkflow.examples.NAME``).

========================= ===============================================================
module                    what it does
========================= ===============================================================
``gpr_freesolv``          Gaussian-process regression with the normalized marginalized graph
                          kernel on FreeSolv (5-fold CV x 3 seeds) or the solubility set
                          (its train/test split), beside Morgan/Tanimoto GPR and the mean
========================= ===============================================================
"""
