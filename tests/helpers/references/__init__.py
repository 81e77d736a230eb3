"""Independent computations the tests check lstmviz against: NumPy BPTT, unrolled tapes and
steps with retain_grad, the modes' references."""
