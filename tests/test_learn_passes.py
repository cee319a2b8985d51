"""The fused element-wise passes of a GP step (mgkflow/learn/_passes.py) against numpy, above and
below the size where the threaded passes take over."""

import numpy as np
import pytest

from mgkflow.learn._passes import PARALLEL_MIN, exp_affine, half_outer_minus_scaled, scaled_transpose, weighted_sums


@pytest.mark.parametrize("shape", [(7, 5), (311, 290)])  # below and above PARALLEL_MIN
def test_passes_equal_numpy(shape):
    rng = np.random.default_rng(sum(shape))
    a, w, k = (rng.normal(size=shape) for _ in range(3))
    assert (a.size >= PARALLEL_MIN) == (shape[0] > 100)
    out = np.empty(shape)
    np.testing.assert_allclose(exp_affine(a, -0.7, 0.3, out), np.exp(-0.7 * a + 0.3), rtol=1e-14)
    same = a.copy()
    np.testing.assert_allclose(exp_affine(same, 2.0, -2.0, same), np.exp(2.0 * a - 2.0), rtol=1e-14)  # in place
    s1, s2 = weighted_sums(w, a, k)
    assert s1 == pytest.approx(float(np.sum(w * a * k)), rel=1e-10)
    assert s2 == pytest.approx(float(np.sum(w * a)), rel=1e-10)
    d, u, v = rng.uniform(0.5, 2.0, shape[1]), rng.normal(size=shape[0]), rng.normal(size=shape[1])
    for layout in ("C", "F"):  # row- and column-major inputs (a triangular solve's results are column-major)
        b = np.array(a, order=layout)
        t = scaled_transpose(b, 2.5)
        assert t.flags.c_contiguous
        np.testing.assert_array_equal(t, 2.5 * a.T)
        h = half_outer_minus_scaled(b, d, u, v)
        assert h.flags.f_contiguous if layout == "F" else h.flags.c_contiguous  # in the input's layout
        np.testing.assert_allclose(h, 0.5 * (np.outer(u, v) - a / d), rtol=1e-13, atol=1e-15)
