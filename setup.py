"""The optional C accelerator of the store's record conversion (tracer/store/_columns.c).

Everything else is in pyproject.toml. ``optional=True``: where no C compiler is available the
install still succeeds and the store converts records in Python (same tables, slower tracing).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("tracer.store._columns", ["tracer/store/_columns.c"], optional=True)])
