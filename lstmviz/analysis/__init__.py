"""NumPy-only reductions of traces and recordings: no TensorFlow, no Qt.

- `decay`: the decay per step, steps per decade, reach and trend of one gradient-norm curve;
- `directions`: every recurrent direction of a trace (or a recording's record) as norm curves
  and, where the trace holds them, the per-unit gradients and the gate activations;
- `diagnosis`: a `Diagnosis` per trace (`trace.diagnosis`), a `RecordingDiagnosis` per recording;
- `compare`: two runs side by side;
- `sources`: `lstmviz.diagnose` and `lstmviz.compare` on traces, recordings, or their files; a
  model file runs through model mode first (the engine, and TensorFlow, imported only then).

Rooms: `images/` (pictures drawn with NumPy alone) and `report/` (the summary line, the PDF
report's parts, the CSV tables).

Definitions, formulas and sources: docs/diagnosis.md.
"""
