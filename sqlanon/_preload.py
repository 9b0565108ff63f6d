"""Imported once by the local worker pool's fork server
(:class:`sqlanon.executors.LocalExecutor`): workers then start with sqlanon
imported and the compiled kernel loaded."""

from . import engine, mondrian, worker  # noqa: F401

mondrian.warm_up()
