"""The file formats read without running code from the file: Keras 3 and legacy `.h5` files
(`keras_files`, `keras_model`, `keras_config`), NumPy `.npz` (`npz_files`) and PyTorch state
dicts (`torch_files`); `found` is what a reader returns. NumPy, json and h5py: no Keras.
"""
