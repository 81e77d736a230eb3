"""Opening LSTM weights in the window: one file (its layer asked for when it holds several,
`pick_layer`), one file per batch (batchwise mode's files generator), the dock's Layer field
and File → Open weights…. Mixed into `FileActions` (gui/parts/file_actions.py), whose
`window`, `params`, `message`, `settings` and `_not_opened` it uses. Files are read with NumPy
and h5py (no TensorFlow)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QFileDialog

from lstmviz.core.errors import LstmvizError
from lstmviz.gui.dialogs.file_dialogs import ask_to_open, last_folder, pick_layer, remember_folder
from lstmviz.io import files
from lstmviz.io.absolute_paths import absolute
from lstmviz.weights.loaders import LayerInfo, WeightsFile, bidirectional_pick, weight_files


class WeightsActions:
    """The weights half of `FileActions`: opens weights into the dock (I and H follow the
    file, locked while it is loaded)."""

    def open_weights(self, path: str, layer: str | None = None, quiet: bool = False) -> bool:
        """Use the LSTM weights in `path` (asking which layer when it holds several and
        `layer` is None): I and H follow the file and stay locked while it is loaded.
        Bad files: a dialog naming the file and the problem (status line only if `quiet`)."""
        path = absolute(path)
        try:
            opened = WeightsFile.open(path)  # NumPy and h5py: no TensorFlow
            layers = opened.layers()
            layer = self._which_layer(path, layers, layer, quiet)
            if layer is False:
                return False
            weights, description = opened.read(layer)
        except LstmvizError as exc:
            return self._not_opened("weights", exc, quiet)
        sizes = {"input_dim": weights.input_dim, "hidden": weights.hidden}
        self.params.set_loaded("weights", path, sizes, description, layer, layers)
        if not quiet:
            self.message.setText(f"weights: {description}")
        return True

    def open_batch_weights(
        self, paths: list[str], layer: str | None = None, quiet: bool = False
    ) -> bool:
        """Batchwise mode's files generator: the weights of batch k from the k-th of `paths`
        (in name order), all of one LSTM's sizes; Batches N follows their count, I and H the
        files (locked). Files with several LSTMs: `layer` of each (asked, and listed in the
        Layer field, as the first file has them). A bad file, or files of different sizes: a
        dialog, nothing changes."""
        paths = sorted((absolute(p) for p in paths), key=lambda p: Path(p).name)
        try:
            opened = [WeightsFile.open(path) for path in paths]  # NumPy and h5py: no TensorFlow
            layers = opened[0].layers()
            layer = self._which_layer(paths[0], layers, layer, quiet)
            if layer is False:
                return False
            read, described = zip(*(weights_file.read(layer) for weights_file in opened),
                                  strict=True)  # fmt: skip
            sizes = {(w.input_dim, w.hidden) for w in read}
            if len(sizes) > 1:
                found = ", ".join(f"{Path(p).name}: I={w.input_dim} H={w.hidden}"
                                  for p, w in zip(paths, read, strict=True))  # fmt: skip
                raise LstmvizError(f"the batches' weights must have one size ({found})")
        except LstmvizError as exc:
            return self._not_opened("weights", exc, quiet)
        self.params.widgets["batches"].setValue(len(paths))
        names = ", ".join(Path(p).name for p in paths)
        sizes = {"input_dim": read[0].input_dim, "hidden": read[0].hidden}
        text = (f"{len(paths)} files, batch 1, 2, … in this order: {names} "
                f"(I={sizes['input_dim']}, H={sizes['hidden']})")
        if picked := bidirectional_pick(described[0]) or (repr(layer) if layer else ""):
            text += f"; layer {picked}"
        self.params.set_loaded("weights", ",".join(paths), sizes, text, layer, layers)
        if not quiet:
            self.message.setText(f"weights: one file per batch, {len(paths)} batches")
        return True

    def _which_layer(self, path: str, layers: list[LayerInfo], layer: str | None,
                     quiet: bool) -> str | None | bool:  # fmt: skip
        """The layer to read of a weights file with these LSTM `layers`: `layer` when given,
        the only one, or the one the picker dialog returns (False: cancelled). `quiet` (a
        file re-read) or no one to ask (--screenshot): None, and several layers are an error."""
        if layer is not None:
            return layer
        if len(layers) == 1:
            return layers[0].name or None
        if not layers or quiet:
            return None  # no LSTM, or several and nobody asked: reading says why
        if self.window.quiet_errors:  # nobody to ask
            names = ", ".join(repr(info.name) for info in layers)
            raise LstmvizError(f"{path}: holds {len(layers)} LSTMs ({names}); name one with "
                               "--layer, or open it in the window (no --screenshot) to pick "
                               "one")  # fmt: skip
        picked = self.pick_layer(path, layers)
        return False if picked is None else picked.name

    def pick_layer(self, path: str, layers):
        """The layer picker dialog (tests replace it); None if cancelled."""
        return pick_layer(self.window, path, layers)

    def choose_layer(self, name: str) -> bool:
        """The dock's Layer field: another layer of the weights file(s) loaded, picked from its
        list or typed; it is read (I and H follow). A name the file does not have: a dialog
        listing the ones it has, and the field shows the layer loaded again."""
        config = self.params.config()
        if not config.weights:
            return False
        if config.mode == "batchwise" and config.generator == "files":
            done = self.open_batch_weights([str(p) for p in weight_files(config.weights)], name)
        else:
            done = self.open_weights(config.weights, name)
        if not done:
            self.params.widgets["layer"].revert()
        return done

    def open_weights_dialog(self) -> None:
        """Open one weights file; in batchwise mode with the files generator, one per batch
        (several files chosen at once)."""
        wanted = f"Weights ({files.pattern(files.WEIGHTS)})"
        config = self.params.config()
        if config.mode != "batchwise" or config.generator != "files":
            ask_to_open(self.window, "Open weights", wanted, self.open_weights)
            return
        title = f"Open weights: one file per batch ({config.batches} for Batches N)"
        paths, _ = QFileDialog.getOpenFileNames(self.window, title, last_folder(self.settings),
                                                wanted)
        if paths:
            remember_folder(self.settings, paths[0])
            self.open_batch_weights(paths)
