"""The shipped grader with a band that leaves exactly two of four chunks uncertain, and a loopback LLM."""

import pytest

from grader import ThresholdPolicy, load_grader
from grader.cascade import CascadeGrader
from grader.llm import LLMConfig, LLMGrader
from grader.resilience import RetryPolicy

QUERY = "When was the Eiffel Tower completed?"
TEXTS = ["The Eiffel Tower was completed in 1889 for the World's Fair.",
         "Bananas are rich in potassium.",
         "Gustave Eiffel's company designed the tower.",
         "The Eiffel Tower is in Paris."]


@pytest.fixture(scope="session")
def small():
    return load_grader("default", threads=2)


@pytest.fixture(scope="session")
def band(small):
    """Lowest chunk confidently irrelevant, highest confidently relevant, the middle two uncertain."""
    probs = sorted(g.probability for g in small.grade(QUERY, TEXTS))
    return ThresholdPolicy(lower=(probs[0] + probs[1]) / 2, upper=(probs[2] + probs[3]) / 2)


@pytest.fixture
def cascade(small, band, server):
    llm = LLMGrader(LLMConfig(model="fake", base_url=server.base_url, mode="json_object",
                              retry=RetryPolicy(attempts=1, base_s=0.01), timeout_s=1.0, chunks_per_call=1))
    return CascadeGrader(primary=small, escalate_to=llm, policy=band)
