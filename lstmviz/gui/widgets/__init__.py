"""The window's widgets: `panel_area` (the panels in their splitters), `params` (the parameter
dock) with its `fields` and `model_table`, `recording_bar` (the bar over a recording's panels)
and `diagnosis_plots` (the Diagnosis dock's plots and the comparison window).

Imports `gui.state`, plots/ and the floors below.
"""
