"""Front-ends over the graders: the ``crag`` CLI (and, later, the orchestrator and HTTP service)."""

__all__: list[str] = []
