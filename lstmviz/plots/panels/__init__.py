"""The panels, each drawn from a trace's (or a recording's) arrays: `panel` (their base),
`curves`, `heatmaps`, `training`, `record_panels`, `model_curves`, `model_maps`, and `marks`
(pass boundaries, non-finite values).

pyqtgraph; imports `plots.style`, `plots.axis`, analysis/ and the floors below.
"""
