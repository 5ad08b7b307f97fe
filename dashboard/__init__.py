"""The prunegate dashboard: a Streamlit + Plotly app over the trace store (``prunegate dashboard``).

Pages live in ``dashboard/views`` (one module each), shared pieces in ``dashboard/components``;
every query comes from :mod:`tracer.queries`. Arrows point one way: dashboard -> tracer.
"""
