"""The heatmaps' and the summary's reductions of a big gradient [T, B, H]: the right values
without a temporary copy of the array (a float64 copy of a 1 GB gradient would take 2 GB more,
in the window and in `lstmviz export`)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from lstmviz.analysis import values


def gradient(seed: int = 0) -> np.ndarray:
    """[T=300, B=32, H=512] float32 (19.7 MB), its largest |g| negative."""
    g = np.random.default_rng(seed).standard_normal((300, 32, 512), dtype=np.float32)
    g[7, 3, 11] = -40.0  # the largest |g| is negative
    return g


def peak_bytes(reduce, g: np.ndarray) -> tuple[int, object]:
    """Bytes allocated at most while `reduce(g)` runs (NumPy reports to tracemalloc), and its
    result."""
    tracemalloc.start()
    try:
        result = reduce(g)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, result


@pytest.mark.parametrize("what", ["samples", "units", "max abs"])
def test_a_reduction_of_a_big_gradient_allocates_a_small_part_of_it(what):
    g = gradient()
    reduce = {"samples": lambda g: values.rows_matrix({"grad_h_total": g})[0],
              "units": lambda g: values.units_matrix({"grad_h_total": g}),
              "max abs": values.max_abs}[what]  # fmt: skip
    peak, result = peak_bytes(reduce, g)
    extra = peak - np.asarray(result).nbytes
    assert extra < g.nbytes / 4, f"{what}: {extra} bytes besides its result for {g.nbytes}"


def test_the_reductions_equal_float64_loops():
    g = gradient(1)
    wide = g.astype(np.float64)
    samples = np.array([[np.sqrt(np.sum(wide[t, b] ** 2)) for t in range(300)]
                        for b in range(32)])  # fmt: skip
    rows, name = values.rows_matrix({"grad_h_total": g})
    assert name == "batch sample" and rows.shape == (32, 300)
    np.testing.assert_allclose(rows, samples, rtol=1e-12)
    units = np.array([[np.mean(np.abs(wide[t, :, j])) for t in range(300)] for j in range(512)])
    np.testing.assert_allclose(values.units_matrix({"grad_h_total": g}), units, rtol=1e-12)
    assert values.max_abs(g) == 40.0
    assert values.max_abs(-g) == 40.0


def test_units_of_a_per_batch_gradient_average_its_batches_too():
    """[N, T, B, H] (per-batch weights): each unit's mean over every batch and sample."""
    g = np.stack([gradient(2), 3 * gradient(3)])
    wide = np.abs(g.astype(np.float64))
    expected = wide.transpose(3, 1, 0, 2).reshape(512, 300, -1).mean(axis=2)
    np.testing.assert_allclose(values.units_matrix({"grad_h_total": g}), expected, rtol=1e-12)


def test_max_abs_of_a_gradient_with_nan_is_nan():
    g = gradient(4)
    g[5, 0, 0] = np.nan
    assert np.isnan(values.max_abs(g))
