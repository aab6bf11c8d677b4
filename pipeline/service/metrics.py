"""Prometheus metrics of the service, in a registry of their own (one per app, so tests never collide).

No label carries a tenant, a secret or a query (at most an API key's public id, to spot a key probing
for hidden documents): metrics are readable without authentication and must not let one tenant learn
anything about another's data.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from grader.cascade import llm_outage
from models.deps import require

__all__ = ["ServiceMetrics"]

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class ServiceMetrics:
    def __init__(self) -> None:
        prom = require("prometheus_client", "serve")
        self._prom = prom
        self.registry = prom.CollectorRegistry()
        r = self.registry
        self.requests = prom.Counter("crag_requests", "HTTP requests by endpoint and status code",
                                     ["endpoint", "status"], registry=r)
        self.latency = prom.Histogram("crag_request_seconds", "Request latency by endpoint", ["endpoint"],
                                      buckets=LATENCY_BUCKETS, registry=r)
        self.chunks = prom.Counter("crag_chunks_graded", "Chunks graded (all endpoints)", registry=r)
        self.escalations = prom.Counter("crag_escalations", "Chunks sent to the LLM grader", registry=r)
        self.escalation_rate = prom.Gauge("crag_escalation_rate", "Escalated share of graded chunks", registry=r)
        self.llm_failures = prom.Counter("crag_llm_failures", "LLM steps that failed and were degraded", ["stage"],
                                         registry=r)
        self.web_failures = prom.Counter("crag_web_search_failures", "Web search tiers that failed", registry=r)
        self.degraded = prom.Counter("crag_degraded_responses", "Responses flagged degraded", ["endpoint"],
                                     registry=r)
        self.tiers = prom.Counter("crag_fallback_tier", "Retrieval tier that produced the final pool", ["tier"],
                                  registry=r)
        self.outcomes = prom.Counter("crag_outcomes", "Pipeline outcomes", ["outcome"], registry=r)
        self.access_denied = prom.Counter(
            "crag_access_denied", "access_denied answers per API key id (probing for hidden documents shows here)",
            ["key_id"], registry=r)
        self.abstention_rate = prom.Gauge("crag_abstention_rate", "Share of /v1/query answers that abstain",
                                          registry=r)
        self.documents = prom.Counter("crag_document_chunks", "Chunks written (put) or deleted (delete) through "
                                      "/v1/documents", ["action"], registry=r)
        self.rate_limited = prom.Counter("crag_rate_limited", "Requests refused by the per-key rate limit",
                                         registry=r)
        self.batch_requests = prom.Histogram("crag_microbatch_requests", "Requests per model micro-batch",
                                             buckets=(1, 2, 4, 8, 16, 32, 64), registry=r)
        self.batch_seconds = prom.Histogram("crag_microbatch_seconds", "Model time per micro-batch",
                                            buckets=LATENCY_BUCKETS, registry=r)
        self._escalated = 0
        self._graded = 0
        self._queries = 0
        self._abstained = 0

    def graded(self, grades: list[Any]) -> None:
        escalated = sum(1 for g in grades if g.decided_by == "llm" or g.escalation_failed)
        failed = sum(map(llm_outage, grades))
        self.chunks.inc(len(grades))
        self.escalations.inc(escalated)
        if failed:
            self.llm_failures.labels("grade").inc(failed)
        self._graded += len(grades)
        self._escalated += escalated
        self.escalation_rate.set(self._escalated / self._graded if self._graded else 0.0)

    def answered(self, outcome: str, tier: str, degraded_reasons: list[str]) -> None:
        self.outcomes.labels(outcome).inc()
        if tier:
            self.tiers.labels(tier).inc()
        for reason in degraded_reasons:
            if reason.startswith("web"):
                self.web_failures.inc()
            else:
                self.llm_failures.labels("generate" if "generation" in reason else
                                         "assess" if "context" in reason else "grade").inc()
        self._queries += 1
        self._abstained += outcome == "abstention"
        self.abstention_rate.set(self._abstained / self._queries)

    def batch(self, requests: int, pairs: int, seconds: float) -> None:
        self.batch_requests.observe(requests)
        self.batch_seconds.observe(seconds)

    def watch_shift(self, status: Callable[[], Any]) -> None:
        """Gauges read at scrape time from the grader's shift monitor (``status()`` -> ShiftStatus or None)."""
        prom = self._prom
        shifted = prom.Gauge("crag_data_shift", "1 when live scores or chunk lengths differ from the calibration "
                             "data (recalibrate: crag calibrate)", registry=self.registry)
        shifted.set_function(lambda: float(bool(getattr(status(), "shifted", False))))
        p_value = prom.Gauge("crag_data_shift_p_value", "KS p-value of the live window against the calibration "
                             "reference", ["statistic"], registry=self.registry)
        p_value.labels("scores").set_function(lambda: _p(status(), "logit_p_value"))
        p_value.labels("chunk_lengths").set_function(lambda: _p(status(), "length_p_value"))

    def render(self) -> tuple[bytes, str]:
        return self._prom.generate_latest(self.registry), self._prom.CONTENT_TYPE_LATEST


def _p(status: Any, field: str) -> float:
    value = getattr(status, field, None)
    return float("nan") if value is None else float(value)

