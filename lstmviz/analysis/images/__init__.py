"""Pictures drawn with NumPy alone, for a process without a display: `raster` (lines, text,
viridis, PNG) and `panel_images` (the TensorBoard panels). No Qt.
"""
