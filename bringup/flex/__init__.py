"""FlexAttention conformance: mods with dense float64 references, matrices, the case, the summary.

`bringup flex` (bringup/flex/suite.py) plans cases from a matrix (matrix.py); each case runs one
FlexAttention call compiled on the device (case.py), judged against a float64 dense reference on cpu
(reference.py) with attention-specific tolerances (tolerance.py); summary.py writes the sentence
("89/96 passed; 7 budget (all batch 4, seq 8192)") and the heatmap data.
"""
