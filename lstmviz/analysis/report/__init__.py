"""A trace said in words and tables: `summary` (the one-line summary), `model_report` (the PDF
report's parts for a model trace) and `tables` (the diagnosis and the comparison as CSV rows).
NumPy only.
"""
