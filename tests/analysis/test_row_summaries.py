"""Summaries of traces whose norms come in rows. A per-batch-weights trace keeps them as rows
[N, T] (`norm_h_total_by_batch`), not as the plain [T] curve the other modes have: the PDF
report's summary and the notebook's `_repr_html_` still name the largest ‖dL/dh_t‖ and where
(t and batch). A multi-pass trace's notebook table has a row per pass, so that "shrinks going
back in time" speaks of one pass, not of the smallest value of a late pass against the largest
of an early one. Expected values are computed here from the gradients themselves."""

from __future__ import annotations

import numpy as np
import pytest

import lstmviz
from tests.helpers.html_page import Page, facts_table, g3

N, T, B, I, H = 3, 9, 2, 3, 4
P = 3  # passes of T steps


@pytest.fixture(scope="module")
def per_batch():
    rng = np.random.default_rng(5)
    weights = [lstmviz.random_weights(I, H, rng) for _ in range(N)]
    x = rng.standard_normal((N, T, B, I))
    return lstmviz.batchwise_gradients(x, weights, loss="mean_h")


def batch_norms(trace) -> np.ndarray:
    """‖dL/dh_t‖ over (b, j) for every batch and t, float64, from grad_h_total [N, T, B, H]."""
    grad = np.asarray(trace.grad_h_total, np.float64)
    return np.sqrt((grad**2).sum(axis=(2, 3)))


def test_the_pdf_summary_names_the_largest_norm_and_its_batch(per_batch):
    from lstmviz.plots.export.figure import Figure

    norms = batch_norms(per_batch)
    n, t = np.unravel_index(int(np.argmax(norms)), norms.shape)
    with Figure(per_batch) as figure:
        lines = figure.summary_lines()
    found = [line for line in lines if line.startswith("largest ‖dL/dh_t‖")]
    assert found == [f"largest ‖dL/dh_t‖: {g3(norms[n, t])} at t={t} (batch {n + 1})"]


def test_the_notebook_shows_each_batchs_extremes(per_batch):
    norms = batch_norms(per_batch)
    rows = facts_table(Page(per_batch._repr_html_()))[1:]
    assert [row[0] for row in rows] == [f"batch {n + 1}" for n in range(N)]
    for row, norm in zip(rows, norms, strict=True):
        hi, lo = int(np.argmax(norm)), int(np.argmin(norm))
        way = "shrinks" if lo < hi else "grows"
        assert row[1:] == [f"{g3(norm[hi])} at t = {hi}", f"{g3(norm[lo])} at t = {lo}",
                           f"{g3(norm[hi] / norm[lo])} ({way} going back in time)"]  # fmt: skip


@pytest.fixture(scope="module")
def multi_pass():
    rng = np.random.default_rng(6)
    weights = lstmviz.random_weights(I, H, rng)
    x = rng.standard_normal((P, T, B, I))
    target = rng.uniform(-0.5, 0.5, (P, B, H))  # a loss on each pass's last step
    return lstmviz.multipass_gradients(x, weights, loss="last_mse", target=target)


def test_the_notebook_shows_each_passs_extremes_at_the_ts_of_the_plot(multi_pass):
    grad = np.asarray(multi_pass.grad_h_total, np.float64)  # [P·T, B, H]
    norms = np.sqrt((grad**2).sum(axis=(1, 2))).reshape(P, T)
    rows = facts_table(Page(multi_pass._repr_html_()))[1:]
    assert [row[0] for row in rows] == [f"pass {p + 1}" for p in range(P)]
    for p, (row, norm) in enumerate(zip(rows, norms, strict=True)):
        hi, lo = int(np.argmax(norm)), int(np.argmin(norm))
        assert lo < hi  # each pass's loss at its last step: smaller going back within it
        assert row[1:] == [f"{g3(norm[hi])} at t = {p * T + hi}",
                           f"{g3(norm[lo])} at t = {p * T + lo}",
                           f"{g3(norm[hi] / norm[lo])} (shrinks going back in time)"]  # fmt: skip
