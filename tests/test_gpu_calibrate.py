"""CPU parts of the strategy calibration benchmark (mgkflow.bench.gpu_calibrate)."""

from __future__ import annotations

import numpy as np

from mgkflow.bench.gpu_calibrate import _evaluate, geometric_graph
from mgkflow.gpu.strategies.cost import CostModel


def test_geometric_graph_has_about_eight_neighbours() -> None:
    g = geometric_graph(800, seed=3)
    deg = g.adjacency.nnz / g.n_nodes
    assert 7.5 <= deg <= 8.5
    lengths = np.asarray(g.edge_labels["length"])
    assert lengths.max() <= 4.0 + 1e-9 and lengths.min() > 0
    assert (g.adjacency != g.adjacency.T).nnz == 0


def test_evaluate_totals_chooser_and_oracle() -> None:
    rows = []
    # strategy a costs 1 per pair, b costs 3 on pair p0 and 0.5 on pair p1; features = the truth
    for pair, ta, tb in (("p0", 1.0, 3.0), ("p1", 1.0, 0.5)):
        rows.append({"set": "s", "role": "eval", "pair": pair, "strategy": "wide_rows", "device_s": ta,
                     "f_products": ta, "f_unknowns": 0.0, "f_tile_pairs": 0.0})  # fmt: skip
        rows.append({"set": "s", "role": "eval", "pair": pair, "strategy": "staged", "device_s": tb,
                     "f_entries_x_groups": tb, "f_slice_loads": 0.0, "f_unknowns": 0.0})  # fmt: skip
    models = {
        "wide_rows": CostModel("wide_rows", ("products",), (1.0,), 0.0),
        "staged": CostModel("staged", ("entries_x_groups",), (1.0,), 0.0),
    }
    out = _evaluate(rows, "s", "eval", ["wide_rows", "staged"], models)
    assert out["total_s"] == {"wide_rows": 2.0, "staged": 3.5} and out["best_single"] == "wide_rows"
    assert out["chooser_s"] == out["oracle_s"] == 1.5 and out["picks"] == {"p0": "wide_rows", "p1": "staged"}
    assert out["chooser_over_best_single"] == 0.75
