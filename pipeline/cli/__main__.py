"""``python -m pipeline.cli``: the same as the ``crag`` command."""

from pipeline.cli.main import main

raise SystemExit(main())
