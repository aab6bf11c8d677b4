"""Retrieval: documents and ingestion, the embedded hybrid index, the Qdrant retriever, the ONNX embedder, web search.

Everything that finds text for a caller, with permissions enforced inside the retriever.
May import: ``models``, ``grader`` (for shared helpers), and itself. Never the corrective loop, the
service or the CLI.
"""
