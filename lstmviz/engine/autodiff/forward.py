"""A whole model's forward pass, built from its `ModelSpec`, every recurrent direction probed.

Functional, as Keras's TensorFlow backend: tensors in and out, the weights as arguments (one flat
list, in `weight_names` order, so one compiled function serves every set of weights). Sequences
are time-major [T, B, W], x too; the output is batch-major, as Keras gives it.

Keras's semantics, layer by layer: Embedding (a lookup; `mask_zero` masks id 0), Masking (masks
steps whose features all equal `mask_value`, and zeroes them), Dropout-like layers (identity:
inference), LSTM, GRU and SimpleRNN (`any_cell.cell_sequence`: a masked step carries the state
over; with `go_backwards` it reads the sequence backwards and returns its outputs in that order;
at masked steps its output repeats the last one, or is zero with `zero_output_for_mask`, which a
Bidirectional sets when it returns sequences), Bidirectional of each (its backward half's outputs
reversed back to input order, merged by concat, sum, mul or ave), Dense and TimeDistributed
(Dense) on the last axis, Activation, BatchNormalization (inference) and Flatten (inference_layers);
a layer of kind "keras" runs through Keras. A mask
passes through a layer unless the layer returns one vector per sample.

Per recurrent direction the forward records (`Direction`) what the trace needs, and the
caller's tape differentiates: its probes (total dL/dh_t, and dL/dc_t for an LSTM), its stacked h
(the direct partial: through its output only), and its weights.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace

from lstmviz.engine.autodiff.gradients import watch_probes
from lstmviz.engine.autodiff.inference_layers import batch_normalization, flatten
from lstmviz.engine.cells.activations import activation, gate_stat_bounds
from lstmviz.engine.cells.any_cell import cell_activations, cell_sequence, needs_read_probe
from lstmviz.engine.native import kernels
from lstmviz.engine.quiet_tensorflow import tf
from lstmviz.weights.model_spec import (
    CELL_GATES,
    CELLS,
    RECURRENT,
    DirectionSpec,
    LayerSpec,
    ModelSpec,
)


@dataclass
class Direction:
    """One recurrent direction of one forward pass. Arrays [T, B, ·] in processing order
    (`backwards`: the sequence read from its end), or indexed by input position where
    `input_order` (the kernel read a backwards sequence from its end itself); `mask` [T, B]
    float or None, in the same order."""

    name: str
    cell: str  # "lstm", "gru", "simple_rnn"
    backwards: bool
    h: tf.Tensor
    c: tf.Tensor | None  # an LSTM's cell states, else None
    probes: tuple  # (probe_h, probe_c) for an LSTM, (probe_h, None) otherwise
    weights: dict[str, tf.Tensor]  # kernel, recurrent_kernel, bias
    mask: tf.Tensor | None
    gates: tf.Tensor  # activations of the G gate blocks [T, B, G·H] (not differentiated)
    saturated: tf.Tensor  # 1.0 where a gate is saturated, else 0.0 [T, B, G·H]
    saturated_diagnosis: tf.Tensor | None = None  # the same by the diagnosis's margin
    activations: tuple[str, ...] = ()  # each gate block's activation (names, as `gate_names`)
    input_order: bool = False

    @property
    def gate_names(self) -> tuple[str, ...]:
        return CELL_GATES[self.cell]

    @property
    def reversed(self) -> bool:
        """Whether the arrays run from the input's last position to its first."""
        return self.backwards and not self.input_order

    def in_input_order(self, value: tf.Tensor) -> tf.Tensor:
        """A [T, …] array of this direction indexed by input position t."""
        return tf.reverse(value, [0]) if self.reversed else value

    def in_processing_order(self, value: tf.Tensor) -> tf.Tensor:
        """A [T, …] array of this direction in the order the cell read the sequence."""
        return tf.reverse(value, [0]) if self.backwards and self.input_order else value


@dataclass
class Forward:
    """What one forward pass gives: the output (batch-major), the directions, the tensor fed to
    the first LSTM (time-major [T, B, E]; its gradient is the input saliency) and the masks of
    the output and of that input (float 0/1 [T, B], 1 where a step counts)."""

    output: tf.Tensor
    directions: list[Direction]
    first_input: tf.Tensor | None
    mask: tf.Tensor | None  # the output's (a sequence output's steps the loss skips)
    input_mask: tf.Tensor | None  # the first LSTM's input's
    penalty: tf.Tensor | float = 0.0  # the layers' regularization penalties, summed


def weight_names(spec: ModelSpec) -> list[tuple[str, str]]:
    """(layer name, weight key) of every weight the forward takes, in order (the layers
    Keras runs keep their own weights)."""
    return [(layer.name, key) for layer in spec.layers if layer.kind != "keras"
            for key in layer.weights]  # fmt: skip


def flat_weights(spec: ModelSpec) -> list:
    return [spec_layer.weights[key] for spec_layer in spec.layers if spec_layer.kind != "keras"
            for key in spec_layer.weights]  # fmt: skip


def _activation(name: str | None) -> Callable:
    """Keras's activation `name` (Keras 3's definition; "hard_sigmoid_keras2" Keras 2's)."""
    return activation(name).fn


def with_shapes(spec: ModelSpec) -> ModelSpec:
    """`spec` with the shapes a file's config leaves out around layers Keras runs (lstmviz does
    not model them): such a layer without a recorded input shape takes the output of the layer
    before it, and Keras computes its output shape from that."""
    from lstmviz.weights.live.keras_rebuild import keras_output_shape

    layers = list(spec.layers)
    for i, layer in enumerate(layers):
        if layer.kind != "keras":
            continue
        if layer.input_shape is None and i and layers[i - 1].output_shape is not None:
            layer = replace(layer, input_shape=layers[i - 1].output_shape)
        if layer.output_shape is None and layer.input_shape is not None:
            layer = replace(layer, output_shape=keras_output_shape(layer))
        layers[i] = layer
    same = all(a is b for a, b in zip(layers, spec.layers, strict=True))
    return spec if same else replace(spec, layers=tuple(layers))


class ModelForward:
    """The forward of `spec` (built once: layers of kind "keras" are rebuilt in Keras here)."""

    def __init__(self, spec: ModelSpec):
        from lstmviz.weights.live.keras_rebuild import keras_layer

        self.spec = spec
        self.names = weight_names(spec)
        self.keras = {layer.name: keras_layer(layer) for layer in with_shapes(spec).layers
                      if layer.kind == "keras"}  # fmt: skip

    def __call__(self, x: tf.Tensor, weights: list[tf.Tensor], tape: tf.GradientTape) -> Forward:
        """Run on x, time-major ([T, B] token ids or [T, B, I]), with `weights` (tensors,
        `weight_names` order), recording the LSTM directions' probes on `tape` (inside its
        `with` block). The output is batch-major, as Keras gives it."""
        by_layer: dict[str, dict[str, tf.Tensor]] = {}
        for (layer, key), value in zip(self.names, weights, strict=True):
            by_layer.setdefault(layer, {})[key] = value
        # x comes time-major and masks are float 0/1 [T, B]: on some CPUs transposing integers
        # or booleans in a graph logs a oneDNN error line.
        value, mask, sequence = x, None, True
        directions: list[Direction] = []
        first_input = input_mask = None
        penalty = 0.0
        for layer in self.spec.layers[1:]:
            w = by_layer.get(layer.name, {})
            kind = layer.kind
            if kind in RECURRENT and first_input is None:
                first_input, input_mask = value, mask
                tape.watch(first_input)
            if kind == "embedding":
                if layer.args.get("mask_zero"):
                    mask = tf.cast(tf.not_equal(value, 0), tf.float32)
                value = tf.gather(w["embeddings"], value)  # [T, B, E]
            elif kind == "masking":
                keep = tf.reduce_any(tf.not_equal(value, layer.args.get("mask_value", 0.0)), -1)
                mask = tf.cast(keep, value.dtype)
                value = value * mask[..., None]
            elif kind in CELLS:
                value, sequence = self._single(layer, w, value, mask, directions, tape)
            elif kind == "bidirectional":
                value, sequence, halves = self._bidirectional(layer, w, value, mask, directions,
                                                              tape)  # fmt: skip
            elif kind in ("dense", "time_distributed_dense"):
                value = tf.tensordot(value, w["kernel"], 1)
                if "bias" in w:
                    value = value + w["bias"]
                value = _activation(layer.args.get("activation"))(value)
            elif kind == "activation":
                value = _activation(layer.args.get("activation"))(value)
            elif kind == "batch_normalization":
                value = batch_normalization(value, w, layer.args)
            elif kind == "flatten":
                value, sequence = flatten(value, sequence, layer.args), False
            elif kind == "keras":
                value, sequence, mask = self._keras(layer, value, sequence, mask)
                # its regularization losses (weights, activity), as Keras adds them
                penalty += tf.add_n([tf.cast(v, tf.float32) for v in self.keras[layer.name].losses]
                                    or [tf.zeros([])])  # fmt: skip
            if layer.args.get("regularizers"):
                outputs = {"output": value, **(halves if kind == "bidirectional" else {})}
                penalty += self._penalty(layer, w, outputs, sequence)
            if not sequence:
                mask = None
        if sequence:
            value = tf.transpose(value, [1, 0, *range(2, value.shape.rank)])
        return Forward(value, directions, first_input, mask, input_mask, penalty)

    def _penalty(self, layer: LayerSpec, w: dict, outputs: dict, sequence: bool):
        """The layer's regularization loss as Keras adds it to the compiled loss: each
        regularized weight's penalty, and the activity regularizers' on the outputs (the
        layer's "output", a Bidirectional's halves' "forward/output" and "backward/output"),
        batch-major, divided by the batch size."""
        import keras

        total = 0.0
        for key, config in layer.args["regularizers"].items():
            regularize = keras.regularizers.get(config)
            if key not in outputs:
                total += regularize(w[key])
                continue
            value = outputs[key]
            batch_major = tf.transpose(value, [1, 0, *range(2, value.shape.rank)]) if (
                sequence and value.shape.rank >= 2) else value  # fmt: skip
            total += regularize(batch_major) / tf.cast(tf.shape(batch_major)[0], tf.float32)
        return total

    def _keras(self, layer: LayerSpec, value, sequence: bool, mask):
        """(output, whether it is a sequence, its mask): Keras takes the mask as its layers
        take it and gives the output's (none where the layer drops it, as Conv1D does)."""
        model = self.keras[layer.name]
        batch_major = tf.transpose(value, [1, 0, 2]) if sequence else value
        given = None if mask is None or not sequence else tf.transpose(mask) > 0.5  # [B, T]
        with warnings.catch_warnings():  # the wrapper's own: its layer takes the mask
            warnings.filterwarnings("ignore", r"Layer 'lstmviz_.*' \(of type Functional\)")
            out = model(batch_major, mask=given)
        if out.shape.rank != 3:
            return out, False, None
        kept = getattr(out, "_keras_mask", None)  # bool [B, T]: where Keras keeps it
        kept = None if kept is None else tf.transpose(tf.cast(kept, tf.float32))
        return tf.transpose(out, [1, 0, 2]), True, kept

    def _direction(self, spec: DirectionSpec, w: dict, x, mask, tape, share=1) -> Direction:
        """Run one direction of `spec.cell` over x [T, B, I] from zeros (read backwards when
        its args say `go_backwards`), one of `share` running at once."""
        state = tf.zeros([tf.shape(x)[1], w["recurrent_kernel"].shape[0]], x.dtype)
        return probed_direction(spec.name, spec.cell, spec.args, x, state, w, mask, tape, share)

    def _output(self, direction: Direction, args: dict, sequence: bool, by_input: bool = False):
        """The layer's output from a direction: h (sequences: in processing order, as Keras
        returns a go_backwards layer's, or by input position with `by_input`, as a
        Bidirectional takes its backward half's), zeroed at masked steps with
        `zero_output_for_mask`; else the last h the cell computed."""
        h = direction.h
        if not sequence:
            return h[0] if direction.backwards and direction.input_order else h[-1]
        if args.get("zero_output_for_mask") and direction.mask is not None:
            h = h * direction.mask[..., None]
        return direction.in_input_order(h) if by_input else direction.in_processing_order(h)

    def _single(self, layer: LayerSpec, w: dict, x, mask, directions, tape):
        """A recurrent layer of one direction: (its output, whether it is a sequence)."""
        direction = self._direction(layer.directions()[0], w, x, mask, tape)
        directions.append(direction)
        sequence = bool(layer.args.get("return_sequences"))
        return self._output(direction, layer.args, sequence), sequence

    def _bidirectional(self, layer: LayerSpec, w: dict, x, mask, directions, tape):
        """(the merged output, whether it is a sequence, the halves' outputs by name)."""
        sequence = bool(layer.args.get("return_sequences"))
        outputs = []
        for half, spec in zip(("forward", "backward"), layer.directions(), strict=True):
            weights = {k.split("/", 1)[1]: v for k, v in w.items() if k.startswith(half + "/")}
            direction = self._direction(spec, weights, x, mask, tape, _side_by_side())
            directions.append(direction)
            # as Keras: the backward half's outputs flipped back to input order
            outputs.append(self._output(direction, {**spec.args, "zero_output_for_mask": sequence},
                                        sequence, by_input=True))  # fmt: skip
        forward, backward = outputs
        halves = {"forward/output": forward, "backward/output": backward}
        merge = layer.args.get("merge_mode", "concat")
        if merge == "concat":
            return tf.concat([forward, backward], -1), sequence, halves
        if merge == "sum":
            return forward + backward, sequence, halves
        if merge == "mul":
            return forward * backward, sequence, halves
        return (forward + backward) / 2.0, sequence, halves


def probed_direction(name: str, cell: str, args: dict, x, h0, w: dict, mask, tape,
                     share: int = 1, c0=None) -> Direction:  # fmt: skip
    """Run one direction of `cell` (its `args`: activations, go_backwards, reset_after) over x
    [T, B, I] from h0 (and an LSTM's c0, h0 when None) [B, H] with the weights `w` (kernel,
    recurrent_kernel, and bias unless the layer has none), probed on `tape` (inside its `with`
    block): the probes' gradients are the totals. Without a bias, zeros are watched in its
    place: the gradient a bias would get is still shown."""
    backwards = bool(args.get("go_backwards"))
    kernel, recurrent, bias = w["kernel"], w["recurrent_kernel"], w.get("bias")
    if bias is None:
        shape = kernel.shape[1:]
        if cell == "gru" and args.get("reset_after"):
            shape = (2, *shape)
        bias = tf.zeros(shape, recurrent.dtype)
        tape.watch(bias)
    if needs_read_probe(cell, args):  # zeros the loop adds to h_t (and c_t)
        shape = [tf.shape(x)[0], tf.shape(h0)[0], h0.shape[-1]]
        probes = (tf.zeros(shape, x.dtype), tf.zeros(shape, x.dtype))  # two tensors
        tape.watch(probes)
    else:
        probes = watch_probes(tape, x, h0)
    if cell != "lstm":
        probes = (probes[0], None)
    weights = {"kernel": kernel, "recurrent_kernel": recurrent, "bias": bias}
    run = cell_sequence(cell, args, x, h0, weights, probes, mask, backwards, share, c0=c0)
    acts = tuple(act.name for act in cell_activations(cell, args))
    return Direction(name, cell, backwards, run.h, run.c, probes, weights, run.mask, run.gates,
                     run.saturated, run.saturated_diagnosis, acts, run.input_order)


def _side_by_side() -> int:
    """How many of a Bidirectional's directions run at once, each on its share of the native
    kernels' threads: both, unless TensorFlow runs one op at a time."""
    return 1 if tf.config.threading.get_inter_op_parallelism_threads() == 1 else 2


def gate_activity(direction: Direction) -> dict[str, tf.Tensor]:
    """The direction's G gates (LSTM i, f, g, o; GRU z, r, h~; SimpleRNN h) summarized from
    the activations the cell computed, over the unmasked (t, b) (0 where all are masked):
    `gates_mean` and `gates_saturated` [G, T] (indexed by input position) each gate's mean
    activation and the fraction saturated (activations.py) over samples and units at every
    step; `gates_unit_mean` [G, H] each gate's mean per unit over (t, b);
    `gates_saturated_diagnosis` [G] the fraction of (t, b, j) saturated by the diagnosis's
    margin (when the direction holds it). Gates of tanh and sigmoid only, in a graph with the
    native library: summed by the LSTM forward kernel as it ran, or in one pass of
    `gate_stats.cc` over the activations (`_fused_sums`)."""
    steps, batch, units = (tf.shape(direction.h)[k] for k in range(3))
    count_gates = len(direction.gate_names)
    weight = tf.ones([steps, batch], direction.gates.dtype) if direction.mask is None else (
        direction.mask)  # fmt: skip
    count = tf.reduce_sum(weight, 1) * tf.cast(units, weight.dtype)  # [T]
    samples = tf.reduce_sum(weight)  # the unmasked (t, b)

    def per_step(total):  # [T, G] sums -> [G, T] (input order) means over unmasked (b, j)
        return tf.transpose(direction.in_input_order(tf.math.divide_no_nan(total, count[:, None])))

    fused = _fused_sums(direction)
    if fused is not None:
        sums, unit_sums = fused  # [T, 3, G], [G·H]
        cells = samples * tf.cast(units, weight.dtype)  # the unmasked (t, b, j)
        return {"gates_mean": per_step(sums[:, 0]), "gates_saturated": per_step(sums[:, 1]),
                "gates_unit_mean": tf.math.divide_no_nan(
                    tf.reshape(unit_sums, [count_gates, units]), samples),
                "gates_saturated_diagnosis": tf.math.divide_no_nan(
                    tf.reduce_sum(sums[:, 2], 0), cells)}  # fmt: skip

    def blocks(values):  # [T, B, G·H] -> [T, B, G, H]
        return tf.reshape(values, [steps, batch, count_gates, units])

    def mean(values):  # [T, B, G·H] -> [G, T] (input order), over unmasked (b, j)
        return per_step(tf.einsum("tb,tbgh->tg", weight, blocks(values)))

    out = {"gates_mean": mean(direction.gates), "gates_saturated": mean(direction.saturated),
           "gates_unit_mean": tf.math.divide_no_nan(
               tf.einsum("tb,tbgh->gh", weight, blocks(direction.gates)), samples)}  # fmt: skip
    if direction.saturated_diagnosis is not None:
        total = tf.einsum("tb,tbgh->g", weight, blocks(direction.saturated_diagnosis))
        out["gates_saturated_diagnosis"] = tf.math.divide_no_nan(
            total, samples * tf.cast(units, weight.dtype))  # fmt: skip
    return out


def _fused_sums(direction: Direction) -> tuple[tf.Tensor, tf.Tensor] | None:
    """(sums [T, 3, G], unit_sums [G·H]) of the direction's gates as gate_sums.h defines them
    (saturated as `Activation.saturated` says: |y − centre| > half-width − margin): those the
    LSTM forward kernel summed (`kernels.gate_sums`), else `LstmvizGateStats`'s; None where
    neither applies (eagerly, without the native library, gates not float32, another
    activation, or a direction that does not name its activations)."""
    library = kernels.library()
    attrs = gate_stat_bounds(direction.activations)
    if library is None or tf.executing_eagerly() or direction.gates.dtype != tf.float32 or (
            attrs is None):  # fmt: skip
        return None
    summed = kernels.gate_sums(direction.gates, attrs)
    if summed is not None:
        return summed
    mask = [] if direction.mask is None else [tf.cast(direction.mask, tf.float32)]
    return library.lstmviz_gate_stats(direction.gates, mask, **attrs)
