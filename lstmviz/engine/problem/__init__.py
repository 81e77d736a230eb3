"""What a run computes on, without TensorFlow at import: `seeded` (a run's Problem: inputs,
weights, state and target, seeded or read from files), `losses` (the losses on hidden states),
`tasks` (training tasks), `weight_sources` (where each batch's weights come from: random, a
hypernetwork, files) and `graph_data` (data for a model Keras runs).

NumPy only when imported (TensorFlow or Keras inside functions, when a run needs them;
tests/test_import_cycles.py checks it); imports core/, io/, weights/.
"""
