"""The ``crag`` command line and batch jobs (grade-file, ask, index, serve, keys; training commands arrive
through ``crag.commands`` entry points, so nothing here imports ``training``).

The outermost front-end: may import every other room of ``pipeline``, ``grader`` and ``models``.
"""

from pipeline.cli.main import main

__all__ = ["main"]
