"""The training side of the ``crag`` command line, registered through ``crag.commands`` entry points."""
