"""The HTTP service: FastAPI app, request schemas, API keys, rate limits, micro-batching, Prometheus metrics.

A front-end over the corrective loop. May import: ``models``, ``grader``, ``pipeline.retrieval``,
``pipeline.corrective`` and itself. Never the CLI.
"""
