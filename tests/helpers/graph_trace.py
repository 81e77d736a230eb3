"""A synthetic model trace of a graph: an encoder LSTM direction whose final state is the initial
state of a decoder LSTM direction (stepped once per token), two inputs, each direction its own
length. No TensorFlow: the arrays are made so that every norm is the norm of the gradient it
summarises, as the engines write them.

    enc  (direction 0): T0 = 6 steps, 1 call, initial_from -1, fed by input "src" [6, B] ids
    dec  (direction 1): T1 = 4 steps, 4 calls, initial_from 0, fed by input "tgt" [4, B] ids

The loss enters at every decoder step (a per-token loss): dL/dh of the decoder is its direct
partial plus DEC_CARRY × the next step's; the encoder's outputs are not read (its direct
partial is zero), its dL/dh at its last step is HANDOVER × the decoder's at step 0, and falls
by ENC_DECAY per step back from there.
"""

from __future__ import annotations

import numpy as np

from lstmviz.core.config import RunConfig
from lstmviz.io.trace import GradientTrace, step_norm

B, H, E = 3, 4, 5
T_ENC, T_DEC = 6, 4
DEC_CARRY = 0.6  # dL/dh_t of the decoder: direct_t + DEC_CARRY · dL/dh_{t+1}
HANDOVER = 0.5  # the encoder's last dL/dh: HANDOVER · the decoder's dL/dh at step 0
ENC_DECAY = 0.25  # the encoder's dL/dh falls by this per step back
NAMES = ("enc", "dec")
INPUTS = ("src", "tgt")


def _unit_rows(rng, steps: int) -> np.ndarray:
    """[steps, B, H] random directions, each step's norm over (b, j) one."""
    g = rng.standard_normal((steps, B, H))
    return g / np.sqrt((g**2).sum(axis=(1, 2), keepdims=True))


def chain_gradients(rng, enc_steps: int = T_ENC) -> dict[str, np.ndarray]:
    """dL/dh (total, direct) and dL/dc of both directions, float64."""
    direct_dec = _unit_rows(rng, T_DEC) * rng.uniform(0.5, 1.5, (T_DEC, 1, 1))
    total_dec = np.zeros_like(direct_dec)
    for t in range(T_DEC - 1, -1, -1):
        carried = DEC_CARRY * total_dec[t + 1] if t + 1 < T_DEC else 0.0
        total_dec[t] = direct_dec[t] + carried
    at_handover = HANDOVER * np.sqrt((total_dec[0] ** 2).sum())
    scale = at_handover * ENC_DECAY ** (enc_steps - 1 - np.arange(enc_steps))
    total_enc = _unit_rows(rng, enc_steps) * scale[:, None, None]
    return {"enc_total": total_enc, "enc_direct": np.zeros_like(total_enc),
            "enc_c": 0.8 * total_enc, "dec_total": total_dec, "dec_direct": direct_dec,
            "dec_c": 0.8 * total_dec}  # fmt: skip


def _gates(rng, steps: int) -> dict[str, np.ndarray]:
    mean = rng.uniform(0.2, 0.8, (4, steps))
    mean[2] = rng.uniform(-0.5, 0.5, steps)  # the candidate g: tanh
    return {"gate_names": np.array(["i", "f", "g", "o"]),
            "gates_mean": mean.astype(np.float32),
            "gates_saturated": rng.uniform(0.0, 0.1, (4, steps)).astype(np.float32),
            "gates_unit_mean": rng.uniform(0.3, 0.9, (4, H)).astype(np.float32),
            "gates_saturated_diagnosis": rng.uniform(0.0, 0.2, 4).astype(np.float32)}  # fmt: skip


def graph_arrays(seed: int = 0, legacy_input: bool = False,
                 enc_steps: int = T_ENC) -> dict[str, np.ndarray]:  # fmt: skip
    """The trace's arrays (see the module's docstring). `legacy_input`: one input under the
    plain keys `x`, `grad_input`, `saliency` (the encoder's), as a single-input model writes
    them. `enc_steps`: the encoder's (and its input's) length."""
    rng = np.random.default_rng(seed)
    g = chain_gradients(rng, enc_steps)
    a: dict[str, np.ndarray] = {"layer_names": np.array(NAMES)}
    steps = {0: enc_steps, 1: T_DEC}
    for k, name in enumerate(NAMES):
        T = steps[k]
        a[f"layer{k}_cell"] = np.array("lstm")
        a[f"layer{k}_calls"] = np.array(1 if k == 0 else T_DEC, np.int64)
        a[f"layer{k}_initial_from"] = np.array(-1 if k == 0 else 0, np.int64)
        a[f"layer{k}_h"] = np.tanh(rng.standard_normal((T, B, H))).astype(np.float32)
        a[f"layer{k}_c"] = rng.standard_normal((T, B, H)).astype(np.float32)
        a[f"layer{k}_grad_h_total"] = g[f"{name}_total"].astype(np.float32)
        a[f"layer{k}_grad_c_total"] = g[f"{name}_c"].astype(np.float32)
        a[f"layer{k}_grad_h_direct"] = g[f"{name}_direct"].astype(np.float32)
        a[f"layer{k}_grad_kernel"] = rng.standard_normal((E, 4 * H)).astype(np.float32)
        a[f"layer{k}_grad_recurrent_kernel"] = rng.standard_normal((H, 4 * H)).astype(np.float32)
        a[f"layer{k}_grad_bias"] = rng.standard_normal(4 * H).astype(np.float32)
        a.update({f"layer{k}_{key}": value for key, value in _gates(rng, T).items()})
    T = max(steps.values())
    for key, part in (("norm_h_total_by_layer", "grad_h_total"),
                      ("norm_h_direct_by_layer", "grad_h_direct"),
                      ("norm_c_total_by_layer", "grad_c_total")):  # fmt: skip
        rows = np.full((len(NAMES), T), np.nan, np.float32)
        for k in range(len(NAMES)):
            rows[k, : steps[k]] = step_norm(a[f"layer{k}_{part}"])
        a[key] = rows
    for name, length in zip(INPUTS, (enc_steps, T_DEC), strict=True):
        if legacy_input and name != INPUTS[0]:
            continue
        suffix = "" if legacy_input else f"_{name}"
        grad = rng.standard_normal((length, B, E)).astype(np.float32)
        grad *= np.linspace(0.2, 1.0, length, dtype=np.float32)[:, None, None]
        a[f"x{suffix}"] = rng.integers(1, 30, (length, B)).astype(np.int64)
        a[f"grad_input{suffix}"] = grad
        a[f"saliency{suffix}"] = np.sqrt((grad.astype(np.float64) ** 2).sum(-1)).T.astype(
            np.float32)  # fmt: skip
    a["y"] = rng.integers(0, 30, (B, T_DEC)).astype(np.int64)
    a["y_pred"] = rng.uniform(0, 1, (B, T_DEC, 30)).astype(np.float32)
    a["loss"] = np.array(2.5, np.float32)
    a["loss_by_sample"] = rng.uniform(2, 3, B).astype(np.float32)
    a["lstm_kernel"] = np.array("native")
    a["model_source"] = np.array("seq2seq.keras: Keras 3 .keras (functional, 2 inputs)")
    a["inputs_source"] = np.array("pairs.npz: src [3, 6] int64, tgt [3, 4] int64")
    a["model_summary"] = np.array(
        "Model: seq2seq (functional)\n"
        "Layer           Class      Output shape   Params\n"
        "src             Input      (None, 6)      0\n"
        "tgt             Input      (None, 4)      0\n"
        "enc             LSTM       (None, 4)      176\n"
        "dec             LSTM       (None, 4, 4)   176\n"
        "out             Dense      (None, 4, 30)  150\n")  # fmt: skip
    return a


def graph_trace(seed: int = 0, legacy_input: bool = False,
                enc_steps: int = T_ENC) -> GradientTrace:  # fmt: skip
    """The synthetic graph trace, checked against the schema."""
    config = RunConfig(mode="model", steps=max(enc_steps, T_DEC), batch=B,
                       loss="sparse_categorical_crossentropy")  # fmt: skip
    arrays = graph_arrays(seed, legacy_input, enc_steps)
    return GradientTrace("model", config, arrays).check()


def chain_norms(trace: GradientTrace, key: str = "norm_h_total_by_layer") -> np.ndarray:
    """`key`'s rows along the chain in processing order [T_enc + T_DEC] (float64): the
    encoder's steps, then the decoder's."""
    rows = np.asarray(trace[key], np.float64)
    enc_steps = trace["layer0_grad_h_total"].shape[0]
    return np.concatenate([rows[0, :enc_steps], rows[1, :T_DEC]])
