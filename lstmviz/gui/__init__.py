"""Qt views. No TensorFlow here: engines run in a worker thread (see worker.py)."""
