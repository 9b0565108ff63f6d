"""Imported once by the worker pool's fork server (see coordinator._pool):
workers then start with sqlanon imported and the compiled kernel loaded."""

from . import engine, mondrian, worker  # noqa: F401

mondrian.warm_up()
