"""The corrective loop: grade -> decide -> correct (rewrite, broaden, web) -> refine -> answer -> check grounding.

``loop.CorrectiveRAG`` is the orchestrator; ``state`` holds its bounds and budget, ``correction`` the
corrective steps, ``answering`` / ``generation`` the answers and the grounding check, ``assembly`` builds a
ready pipeline from settings. May import: ``models``, ``grader``, ``pipeline.retrieval`` and itself.
Never the service or the CLI (they are front-ends over this room).
"""
