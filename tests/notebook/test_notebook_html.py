"""What a notebook shows for a trace or a recording (`_repr_html_`, lstmviz.notebook.html):
well-formed HTML whose facts (sizes, loss, kernel, NaN/Inf, ‖dL/dh_t‖'s extremes and their
ratio, records, steps, epochs, loss first → last) match values computed here from the arrays;
arrays grouped as the text repr groups them; every text escaped; no Qt, no TensorFlow."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import lstmviz
from lstmviz.io.trace import GradientTrace
from tests.helpers.html_page import Page, facts_table, g3

ROOT = Path(__file__).resolve().parents[2]
T, B, I, H = 30, 3, 4, 6
EVIL = "<script>alert(1)</script><img src=x onerror=alert(2)>&amp;"


def norms_over_t(grad: np.ndarray) -> np.ndarray:
    """‖dL/dh_t‖ over (b, j) for every t, in float64, from the gradient itself."""
    grad = np.asarray(grad, np.float64)
    return np.sqrt((grad**2).sum(axis=(1, 2)))


def expected_extremes(norm: np.ndarray, keep: np.ndarray | None = None,
                      backward: bool = False) -> list[str]:  # fmt: skip
    """The extremes table's cells for one direction, computed with plain NumPy: steps not
    kept (padding in every sample) and non-finite values left out. A backward direction reads
    the sequence from its end: back in its time is towards larger t."""
    t = np.arange(norm.size)
    ok = np.isfinite(norm) & (np.ones(norm.size, bool) if keep is None else keep)
    hi = t[ok][np.argmax(norm[ok])]
    lo = t[ok][np.argmin(norm[ok])]
    way = "shrinks" if (lo > hi if backward else lo < hi) else "grows"
    where = "its time, towards larger t" if backward else "time"
    return [f"{g3(norm[hi])} at t = {hi}", f"{g3(norm[lo])} at t = {lo}",
            f"{g3(norm[hi] / norm[lo])} ({way} going back in {where})"]  # fmt: skip


def group_rows(page: Page) -> dict[str, list[str]]:
    """The arrays table (the one with a "shape" heading): "[shape] dtype" -> its keys."""
    table = next(t for t in page.tables if t[0][0] == "shape")
    return {row[0]: row[2].split(", ") for row in table[1:] if row[0].startswith("[")}


def repr_groups(text: str) -> dict[str, list[str]]:
    """The text repr's groups ("  [37, 3, 7] float32: c, grad_c_total, …", wrapped)."""
    groups, current = {}, None
    for line in text.splitlines()[1:]:
        match = re.match(r"  (\[[^\]]*\] \w+): (.*)", line)
        if match:
            current = match[1]
            groups[current] = [k.strip() for k in match[2].split(",") if k.strip()]
        elif line.startswith("      ") and current is not None:
            groups[current] += [k.strip() for k in line.split(",") if k.strip()]
        else:
            current = None
    return groups


@pytest.fixture(scope="module")
def taped() -> GradientTrace:
    rng = np.random.default_rng(3)
    w = lstmviz.random_weights(I, H, rng)
    x = rng.standard_normal((T, B, I))
    return lstmviz.taped_gradients(x, w, loss="last_mse", target=np.zeros((B, H)))


def tiny_model(seed: int = 0):
    """Embedding (mask_zero) → Bidirectional(LSTM 3) → LSTM 2 → Dense: three directions."""
    import keras

    keras.utils.set_random_seed(seed)
    layers = keras.layers
    model = keras.Sequential([
        keras.Input((8,), dtype="int32"),
        layers.Embedding(20, 4, mask_zero=True),
        layers.Bidirectional(layers.LSTM(3, return_sequences=True)),
        layers.LSTM(2),
        layers.Dense(1, activation="sigmoid"),
    ])  # fmt: skip
    model.compile(loss="binary_crossentropy", optimizer=keras.optimizers.Adam(0.05))
    return model


def tokens(count: int, seed: int = 1):
    """Token ids [count, 8] padded at t = 0 (0) in every sample, as Keras's pad_sequences pads
    (in front), and 0/1 targets."""
    rng = np.random.default_rng(seed)
    x = rng.integers(1, 20, (count, 8)).astype(np.int32)
    x[:, 0] = 0
    y = (x[:, 1] > 10).astype(np.float32)[:, None]
    return x, y


@pytest.fixture(scope="module")
def model_trace() -> GradientTrace:
    x, y = tokens(6)
    return lstmviz.model_gradients(tiny_model(), x, y)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Path:
    """A recording written by the Keras callback while fit trains: 3 records."""
    from lstmviz.keras import GradientFlowCallback

    path = tmp_path_factory.mktemp("rec") / "run.lvz"
    x, y = tokens(24, seed=2)
    callback = GradientFlowCallback((x[:8], y[:8]), path, every=2)
    tiny_model().fit(x, y, batch_size=8, epochs=2, callbacks=[callback], verbose=0)
    return path


def test_a_taped_trace_shows_its_facts_computed_from_its_arrays(taped):
    page = Page(taped._repr_html_())
    text = page.text
    assert text.startswith("GradientTrace · taped · ")
    assert f"T={T} B={B} I={I} H={H}" in text
    assert f"loss {g3(float(taped.loss))}" in text
    kernel = {"native": "native kernels", "while_loop": "tf.while_loop"}[str(taped.lstm_kernel)]
    assert kernel in text and "no NaN/Inf ✓" in text
    assert "loaded from file" not in text  # a fresh trace: nothing was loaded
    norm = norms_over_t(taped.grad_h_total)
    rows = facts_table(page)
    assert rows[1] == ["LSTM", *expected_extremes(norm)]
    assert "shrinks going back in time" in rows[1][3]  # last_mse: only t = T-1 feeds the loss
    assert np.argmax(norm) == T - 1 and norm.max() / norm.min() > 10


def test_the_arrays_are_grouped_as_the_text_repr_groups_them_and_folded(taped):
    html_text = taped._repr_html_()
    page = Page(html_text)
    groups = group_rows(page)
    assert groups == repr_groups(repr(taped)) and len(groups) >= 5
    by_shape: dict[str, list[str]] = {}
    for key in sorted(taped.arrays):  # independently: every array of rank ≥ 1 by shape and dtype
        value = np.asarray(taped[key])
        if value.ndim:
            by_shape.setdefault(f"[{', '.join(map(str, value.shape))}] {value.dtype}",
                                []).append(key)  # fmt: skip
    assert groups == by_shape
    table = next(t for t in page.tables if t[0][0] == "shape")
    axes = {row[0]: row[1] for row in table[1:]}
    assert axes[f"[{T}, {B}, {H}] float32"] == "T, B, H"
    assert axes[f"[{I}, {4 * H}] float32"] == "I, 4H"
    # the list of arrays is folded, the facts are not: the facts table precedes <details>
    assert html_text.index("largest / smallest") < html_text.index("<details>")
    assert page.tags.count("details") == page.tags.count("summary") >= 1
    assert f"{len(taped.arrays)} arrays in {len(groups)} shapes" in page.text
    values = {row[0]: row[2] for row in table[1:] if not row[0].startswith("[")}
    assert values == {"loss": f"{float(taped.loss):.4g}", "lstm_kernel": str(taped.lstm_kernel)}


def test_the_text_repr_is_unchanged(taped):
    text = repr(taped)
    assert text.startswith(f"GradientTrace(mode='taped', loss='last_mse', {len(taped.arrays)}")
    assert "<" not in text  # the text repr stays text


def test_nan_and_inf_are_named_and_left_out_of_the_extremes(taped):
    arrays = dict(taped.arrays)
    grad = np.array(taped.grad_h_total)
    grad[4] = np.nan
    grad[7, 0, 0] = np.inf
    arrays |= {"grad_h_total": grad, "nonfinite_steps": np.array([4, 7]),
               "norm_h_total": norms_over_t(grad).astype(np.float32)}  # fmt: skip
    page = Page(GradientTrace(taped.mode, taped.config, arrays)._repr_html_())
    assert "⚠ NaN/Inf at t = 4, 7 (2 steps)" in page.text and "no NaN/Inf" not in page.text
    html = GradientTrace(taped.mode, taped.config, arrays)._repr_html_()
    assert "color:var(--jp-error-color1," in html and "#c00" not in html  # the theme's red
    norm = norms_over_t(grad)
    assert not np.isfinite(norm[[4, 7]]).any()
    assert facts_table(page)[1] == ["LSTM", *expected_extremes(norm)]
    arrays["norm_h_total"] = np.full(T, np.nan, np.float32)
    page = Page(GradientTrace(taped.mode, taped.config, arrays)._repr_html_())
    assert facts_table(page)[1][:2] == ["LSTM", "no finite value"]


def test_a_zero_smallest_norm_gives_an_infinite_ratio(taped):
    arrays = dict(taped.arrays)
    norm = np.array(taped.norm_h_total)
    norm[2] = 0
    page = Page(GradientTrace(taped.mode, taped.config, arrays | {"norm_h_total": norm})
                ._repr_html_())  # fmt: skip
    row = facts_table(page)[1]
    assert row[2] == "0 at t = 2" and row[3] == "∞ (the smallest is 0)"


def test_a_model_trace_shows_every_direction_without_its_padded_steps(model_trace):
    tr = model_trace
    page = Page(tr._repr_html_())
    names = [str(n) for n in tr.layer_names]
    assert len(names) == 3
    assert page.text.startswith("GradientTrace · model · ")
    assert "3 LSTM directions in 2 layers" in page.text and "T=8" in page.text
    assert f"loss binary_crossentropy {g3(float(tr.loss))}" in page.text
    assert f"{float(tr.model_seconds):.2f}\u00a0s" in page.text  # the run's own time
    keep = np.asarray(tr.mask).any(axis=1)
    assert not keep[0] and keep.sum() == 7  # t = 0 is padding in every sample
    rows = facts_table(page)
    assert [r[0] for r in rows[1:]] == names
    for k, row in enumerate(rows[1:]):
        norm = norms_over_t(tr[f"layer{k}_grad_h_total"])
        assert row == [names[k], *expected_extremes(norm, keep, names[k].endswith("/backward"))]
        assert "at t = 0" not in row[1] + row[2]
    # the backward direction's gradient is largest at its first step (t = T-1), where the
    # layer above feeds the loss at its last step: it grows going back in its own time
    back = norms_over_t(tr["layer1_grad_h_total"])
    assert names[1].endswith("/backward") and np.argmax(back) == 7
    assert np.argmin(np.where(keep, back, np.inf)) < 7
    assert rows[2][3].endswith("(grows going back in its time, towards larger t)")
    table = next(t for t in page.tables if t[0][0] == "shape")
    assert {row[0]: row[1] for row in table[1:]}["[8, 6, 3] float32"] == "T, B, H"
    assert "model summary" in page.text and "Bidirectional(LSTM)" in page.text
    assert group_rows(page) == repr_groups(repr(tr))


def test_a_recording_written_by_the_callback_shows_its_facts(recorded):
    rec = lstmviz.load_recording(recorded)
    page = Page(rec._repr_html_())
    text = page.text
    count = len(rec)
    assert count == 3 and rec.finished
    assert text.startswith(f"Recording {recorded.name} · finished")
    steps, epochs = rec.step, rec.epoch
    assert f"{count} records every 2 batches" in text
    assert f"steps {steps[0]}–{steps[-1]}" in text
    assert f"epochs {epochs.min() + 1}–{epochs.max() + 1}" in text
    assert f"loss {g3(rec.loss[0])} → {g3(rec.loss[-1])}" in text
    assert "3 LSTM directions" in text and "T=8" in text
    rows = facts_table(page)
    assert rows[0][0] == (f"‖dL/dh_t‖ at the last record, step {steps[-1]} "
                          f"(epoch {epochs[-1] + 1})")  # fmt: skip
    keep = np.asarray(rec.last.mask).any(axis=1)  # the recorded samples: the same every time
    assert not keep[0]
    for k, row in enumerate(rows[1:]):
        # the last record's norms, from its full trace's gradient itself
        norm = norms_over_t(rec.last[f"layer{k}_grad_h_total"])
        np.testing.assert_allclose(norm, rec.norm_h_total_by_layer[-1, k], rtol=1e-5)
        name = str(rec.layer_names[k])
        assert row == [name, *expected_extremes(norm, keep, name.endswith("/backward"))]
    total = np.sqrt((rec.norm_h_total_by_layer.astype(np.float64) ** 2).sum(axis=2))  # [S, L]
    for k, name in enumerate(rec.layer_names):
        assert f"{name}: ‖dL/dh‖ over all t {g3(total[0, k])} → {g3(total[-1, k])}" in text
    assert group_rows(page)["[3, 3, 8] float32"] == ["norm_c_total_by_layer",
                                                     "norm_h_direct_by_layer",
                                                     "norm_h_total_by_layer"]  # fmt: skip
    assert f".last: the last record's model trace ({len(rec.last.arrays)} arrays)" in text


def test_a_recording_being_written_says_so(tmp_path):
    from tests.helpers.recordings import write

    write(tmp_path / "live.lvz", [1, 2], close=False)
    rec = lstmviz.load_recording(tmp_path / "live.lvz", trace=False)
    page = Page(rec._repr_html_())
    assert not rec.finished and "still being written" in page.text
    assert ".last" not in page.text  # not read: nothing to point at
    assert "steps 5–10" in page.text and f"loss {g3(rec.loss[0])} → {g3(rec.loss[1])}" in page.text


def test_every_text_is_escaped(model_trace, recorded):
    tr = model_trace
    arrays = dict(tr.arrays) | {
        "layer_names": np.array([EVIL, "b", "c"]),
        "model_source": np.array(EVIL),
        "model_summary": np.array(EVIL + "\nsecond line"),
        "lstm_kernel": np.array(EVIL),
        EVIL: np.zeros(2, np.float32),  # a key no schema knows, in an array built by hand
    }
    rec = lstmviz.load_recording(recorded)
    rec_arrays = dict(rec.arrays) | {"layer_names": np.array([EVIL, "b", "c"]),
                                     "inputs_source": np.array(EVIL)}  # fmt: skip
    for html_text in (
        GradientTrace(tr.mode, tr.config, arrays)._repr_html_(),
        dataclasses.replace(rec, arrays=rec_arrays, path=Path(f"/tmp/{EVIL}.lvz"))._repr_html_(),
    ):
        page = Page(html_text)
        assert "script" not in page.tags and "img" not in page.tags
        assert not any(name.startswith("on") for name, _ in page.attrs)
        assert "<script>" not in html_text and "<img" not in html_text
        assert EVIL.split("&")[0] in page.text  # shown as text, entities decoded once
    assert "&amp;amp;" in html_text  # the "&amp;" of the name itself, escaped


def test_an_empty_trace_still_shows(taped):
    page = Page(GradientTrace("taped", taped.config, {})._repr_html_())
    assert page.text.startswith("GradientTrace · taped") and "0 arrays in 0 shapes" in page.text
    assert not [t for t in page.tables if t and t[0][1:2] == ["largest"]]


def test_the_html_imports_neither_qt_nor_tensorflow(taped, recorded, tmp_path):
    saved = taped.save(tmp_path / "t.npz")
    code = (
        "import sys, lstmviz\n"
        f"t = lstmviz.GradientTrace.load({str(saved)!r})._repr_html_()\n"
        f"r = lstmviz.load_recording({str(recorded)!r})._repr_html_()\n"
        "assert 'largest / smallest' in t and 'largest / smallest' in r\n"
        "bad = ('PySide6', 'pyqtgraph', 'tensorflow', 'keras', 'shiboken6')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in bad))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
