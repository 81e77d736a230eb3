"""Helpers the tests share: independent references (NumPy, Keras, PyTorch), model fixtures,
the window's fakes and checks, and a process running the app."""
