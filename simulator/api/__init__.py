"""The public Python API, re-exported by `simulator` (import it from there: `from simulator import predict`).

One module a verb and its results: scenario (Scenario), prediction (predict, scale), comparison (compare),
planning (plan), sweeping (sweep), collective (collective), measured (validate, calibrate, crossval);
results (what every result shares) and figures (plotly, imported when a figure is asked for).
"""
