"""Thin adapters that put the grader into frameworks people already use (each an optional extra).

- :mod:`grader.integrations.langchain`: a LangChain document compressor, a LangGraph ``grade_documents``
  node, and escalation through a LangChain chat model (``crag-grader[langchain]``);
- :mod:`grader.integrations.llamaindex`: a LlamaIndex node postprocessor (``crag-grader[llamaindex]``);
- :mod:`grader.integrations.haystack`: a Haystack component for ``ConditionalRouter`` (``crag-grader[haystack]``).

Each works over any :class:`grader.protocol.Grader` (the small model alone, or the cascade that escalates
its uncertain band to an LLM) and changes neither the grader nor the pipeline. Importing one without its
framework raises an error naming the extra to install.
"""
