"""The micro-batcher: batches concurrent callers, isolates a bad request, skips callers that gave up, and
finishes queued work on close."""

import threading

import pytest

from models import ConfigError, CragError
from pipeline.service.microbatch import BatchedGrader, MicroBatcher


def test_concurrent_requests_share_a_batch_and_match_solo_grades(grader):
    batcher = MicroBatcher(grader, max_wait_ms=100)
    futures = [batcher.submit("What is the capital of France?", [f"Paris is the capital of France ({i})."])
               for i in range(4)]
    results = [f.result(timeout=60) for f in futures]
    batcher.close()
    assert max(batcher.batch_sizes) > 1
    assert [r[0].probability for r in results] == [
        grader.grade("What is the capital of France?", [f"Paris is the capital of France ({i})."])[0].probability
        for i in range(4)]


def test_a_bad_request_fails_alone(grader):
    batcher = MicroBatcher(grader, max_wait_ms=100)
    good = batcher.submit("What is the capital of France?", ["Paris."])
    bad = batcher.submit("   ", ["Paris."])
    assert good.result(timeout=60)[0].probability > 0
    with pytest.raises(ConfigError, match="non-empty"):
        bad.result(timeout=60)
    assert batcher.alive
    batcher.close()


def test_cancelled_callers_are_skipped_and_close_drains_the_queue(grader):
    gate = threading.Event()

    class SlowGrader:
        policy = grader.policy
        name = "slow"

        def grade_many(self, requests):
            gate.wait(10)
            return grader.grade_many(requests)

    batcher = MicroBatcher(SlowGrader(), max_wait_ms=0)
    first = batcher.submit("What is the capital of France?", ["Paris."])  # blocks the worker on the gate
    cancelled = batcher.submit("What is the capital of France?", ["Lyon."])
    queued = batcher.submit("What is the capital of France?", ["Nice."])
    assert cancelled.cancel()
    gate.set()
    batcher.close()
    assert first.result(timeout=10) and queued.result(timeout=10) and cancelled.cancelled()
    assert not batcher.alive
    with pytest.raises(Exception, match="stopped"):
        batcher.submit("q?", ["x"])
    assert BatchedGrader(MicroBatcher(grader)).policy == grader.policy
    with pytest.raises(ConfigError):
        MicroBatcher(grader, max_pairs=0)


def test_a_panic_in_the_model_runtime_fails_its_batch_and_the_worker_lives_on(grader):
    class PanicException(BaseException):  # what pyo3 raises when a native library panics (tokenizers did)
        pass

    class PanickingOnce:
        policy = grader.policy
        name = "panics"
        calls = 0

        def grade_many(self, requests):
            PanickingOnce.calls += 1
            if PanickingOnce.calls == 1:
                raise PanicException("`stride` must be strictly less than `max_len=15`")
            return grader.grade_many(requests)

    batcher = MicroBatcher(PanickingOnce(), max_wait_ms=0)
    with pytest.raises(CragError, match="grading failed: PanicException"):
        batcher.submit("What is the capital of France?", ["Paris."]).result(timeout=60)
    assert batcher.alive
    assert batcher.submit("What is the capital of France?", ["Paris."]).result(timeout=60)[0].probability > 0
    batcher.close()
