"""``python -m sqlanon``: the command line, as the ``sqlanon`` script runs it."""

from ._script import entry

if __name__ == "__main__":  # not when the worker pool's fork server imports the main module
    entry(prog_name="sqlanon")
