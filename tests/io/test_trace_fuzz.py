"""Fuzzing the trace reader: every damaged, foreign or inconsistent file either loads (and then
passes `GradientTrace.check`) or raises TraceError, never anything else."""

import io
import json
import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lstmviz.core.config import RunConfig
from lstmviz.core.errors import TraceError
from lstmviz.io.trace import GradientTrace

T, B, I, H = 4, 2, 3, 2
FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)

    def f(*shape):
        return rng.standard_normal(shape).astype(np.float32)

    arrays = {
        "x": f(T, B, I),
        "kernel": f(I, 4 * H),
        "recurrent_kernel": f(H, 4 * H),
        "bias": f(4 * H),
        "h0": f(B, H),
        "c0": f(B, H),
        "loss": np.float32(0.5),
        "h": f(T, B, H),
        "c": f(T, B, H),
        "grad_h_total": f(T, B, H),
        "grad_c_total": f(T, B, H),
        "grad_h_direct": f(T, B, H),
        "grad_kernel": f(I, 4 * H),
        "grad_recurrent_kernel": f(H, 4 * H),
        "grad_bias": f(4 * H),
        "norm_h_total": f(T),
        "norm_h_direct": f(T),
        "norm_c_total": f(T),
        "nonfinite_steps": np.array([1], np.int64),
    }
    return arrays


def _valid_bytes() -> bytes:
    config = RunConfig(steps=T, batch=B, input_dim=I, hidden=H)
    with tempfile.TemporaryDirectory() as folder:
        path = GradientTrace("taped", config, _arrays()).save(Path(folder) / "t.npz")
        return path.read_bytes()


VALID = _valid_bytes()


def _load_bytes(content: bytes) -> GradientTrace | None:
    """Load `content` as a trace file: the trace, or None when refused with TraceError."""
    fd, name = tempfile.mkstemp(suffix=".npz")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content)
        try:
            trace = GradientTrace.load(name)
        except TraceError as exc:
            assert name in str(exc)  # the message names the file
            return None
        trace.check()
        return trace
    finally:
        os.unlink(name)


def _npz(members: dict[str, object]) -> bytes:
    """An .npz from arrays; object arrays are pickled (as a foreign tool might)."""
    buffer = io.BytesIO()
    np.savez(buffer, **members)
    return buffer.getvalue()


def _meta(config=None, mode="taped") -> dict[str, object]:
    config = (
        RunConfig(steps=T, batch=B, input_dim=I, hidden=H).to_json() if config is None else config
    )
    return {"mode": np.array(mode), "config_json": np.array(config), "format_version": np.int32(1)}


def test_valid_file_loads():
    trace = _load_bytes(VALID)
    assert trace is not None and trace.mode == "taped" and trace.h.shape == (T, B, H)


@FUZZ
@given(st.integers(0, len(VALID) - 1))
def test_truncated_files_are_refused(cut):
    assert _load_bytes(VALID[:cut]) is None


@FUZZ
@given(st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 7)), min_size=1,
                max_size=6))  # fmt: skip
def test_bit_flipped_files_load_or_raise_trace_error(flips):
    content = bytearray(VALID)
    for position, bit in flips:
        content[position] ^= 1 << bit
    _load_bytes(bytes(content))  # a flip inside array data may load: that is fine


_KEYS = sorted(_arrays())
_DTYPES = st.sampled_from(["float64", "float16", "int8", "uint32", "bool", "complex64", "U3",
                           "S4", "object", "datetime64[s]", "V4"])  # fmt: skip
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
_CONFIG_TEXT = st.one_of(
    st.text(max_size=30),  # garbage
    _JSON.map(json.dumps),  # JSON of any type
    st.fixed_dictionaries(  # the right keys with values of any type
        {},
        optional={
            k: _JSON
            for k in (
                "mode",
                "steps",
                "batch",
                "hidden",
                "loss",
                "weights",
                "random_state",
                "seed",
                "passes",
            )
        },  # fmt: skip
    ).map(json.dumps),
)


@st.composite
def _mangled(draw) -> dict[str, object]:
    members: dict[str, object] = {**_meta(), **_arrays()}
    for key in draw(st.lists(st.sampled_from([*_KEYS, "mode", "config_json"]), max_size=3)):
        members.pop(key, None)  # missing keys
    for key in draw(st.lists(st.sampled_from(_KEYS), max_size=3)):
        if key in members:  # wrong dtypes (object arrays are pickled by savez)
            dtype = draw(_DTYPES)
            value = np.asarray(members[key])
            members[key] = (
                np.array([None, {}], dtype=object)
                if dtype == "object"
                else np.ones(value.shape, dtype)
            )
    for key in draw(st.lists(st.sampled_from(_KEYS), max_size=3)):
        if key in members:  # wrong shapes
            shape = draw(st.lists(st.integers(0, 5), max_size=4))
            members[key] = np.zeros(shape, np.float32)
    if draw(st.booleans()):
        members["config_json"] = np.array(draw(_CONFIG_TEXT))
    if draw(st.booleans()):
        members["mode"] = draw(
            st.sampled_from(
                [
                    np.array("nope"),
                    np.array(3),
                    np.array(["taped", "train"]),
                    np.array("batchwise"),
                    np.array(b"taped"),
                ]
            )  # fmt: skip
        )
    if draw(st.booleans()):
        members["format_version"] = draw(
            st.sampled_from([np.int32(99), np.array("1"), np.zeros(2), np.float32(1)])
        )
    return members


@FUZZ
@given(_mangled())
def test_mis_shaped_and_mis_typed_traces_load_or_raise_trace_error(members):
    _load_bytes(_npz(members))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"norm_h_total": np.zeros(T + 1, np.float32)}, "'norm_h_total' has shape [5]"),
        ({"h": np.zeros((T, B + 1, H), np.float32)}, "axis 1 (B) is 3 but x says B=2"),
        ({"kernel": np.zeros((I, 4 * H + 1), np.float32)}, "'kernel' has shape"),
        ({"grad_h_total": np.zeros((T, B), np.float32)}, "must be [T, B, H]"),
        ({"nonfinite_steps": np.array([T], np.int64)}, "steps outside the run"),
        ({"nonfinite_steps": np.array([0.5])}, "integer steps"),
        ({"h": np.zeros((T, B, H), "U1")}, "must be numeric"),
        ({"x": np.zeros((0, B, I), np.float32)}, "empty along T"),
    ],
)
def test_inconsistent_arrays_are_refused_with_a_clear_message(tmp_path, change, message):
    path = tmp_path / "t.npz"
    path.write_bytes(_npz({**_meta(), **_arrays(), **change}))
    with pytest.raises(TraceError, match=None) as info:
        GradientTrace.load(path)
    assert message in str(info.value) and str(path) in str(info.value), str(info.value)


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        (_meta(config="[1, 2]"), "must be a JSON object"),
        (_meta(config="{not json"), "not valid JSON"),
        (_meta(config='{"steps": "ten"}'), "--steps: must be an integer"),
        (_meta(config='{"weights": 5}'), "--weights"),
        (_meta(mode="lstm"), "unknown mode 'lstm'"),
        ({**_meta(), "format_version": np.int32(7)}, "newer lstmviz"),
        ({**_meta(), "mode": np.array(3)}, "mode must be a text scalar"),
    ],
)
def test_bad_metadata_is_refused(tmp_path, meta, message):
    path = tmp_path / "t.npz"
    path.write_bytes(_npz({**meta, **_arrays()}))
    with pytest.raises(TraceError) as info:
        GradientTrace.load(path)
    assert message in str(info.value), str(info.value)


def test_a_lying_header_does_not_allocate_what_it_declares(tmp_path):
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (100000, 100000, 100), }"
    header += b" " * (118 - len(header)) + b"\n"
    member = b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + b"\0" * 16
    path = tmp_path / "t.npz"
    path.write_bytes(_npz(_meta()))
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr("h.npy", member)
    with pytest.raises(TraceError, match="header declares"):
        GradientTrace.load(path)
