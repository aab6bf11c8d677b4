"""Corrective RAG around the graders, in four rooms (each sub-package's docstring says what it may import):

- ``pipeline.retrieval``: documents, ingestion, the embedded index, Qdrant, the embedder, web search;
- ``pipeline.corrective``: the corrective loop and its steps, answers and the grounding check;
- ``pipeline.service``: the HTTP service (a front-end over the loop);
- ``pipeline.cli``: the ``crag`` command line and batch jobs (the outermost front-end).

Dependency direction: retrieval <- corrective <- service <- cli; nothing imports ``training``.
"""

__all__: list[str] = []
