"""Has the live data moved away from what the thresholds were calibrated on? (numpy only)

A bundle stores a compact reference of its calibration data (:func:`make_reference`): quantiles of the
model's logits and of the chunks' lengths, how many pairs they summarise, and their design effects.
Live chunks are not independent draws: a window holds whole retrieval results of a few queries, and
queries differ. Measured on real web data (TREC DL), a plain KS test at alpha 1e-4 fired on 13% of
checks of the calibration domain itself. So the reference also records how much more a window's KS
distance varies than for independent chunks, for windows of retrieval results (``CHUNKS_PER_QUERY`` per
query) of queries *not* in the reference (the calibration queries split in two, many times); the test
divides its effective sample size by that design effect. A :class:`ShiftMonitor`
keeps a bounded window of live logits and lengths and, every ``check_every`` new chunks once the window
is full, runs two-sample Kolmogorov-Smirnov tests of the window against the reference. Each check has a
false-alarm probability of at most ``alpha`` (split over the two statistics), so over ``c`` checks of
unshifted data at most ``c * alpha`` alarms are expected. An alarm is only reported: no verdict changes
because of it. The fix it names is recalibration on labelled pairs of the new data.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from models.errors import ConfigError

__all__ = ["MIN_REFERENCE_PAIRS", "ShiftMonitor", "ShiftStatus", "compare_to_reference", "design_effects",
           "ks_two_sample", "make_reference", "monitoring_paused", "not_monitored"]

REFERENCE_QUANTILES = 201
DEFAULT_WINDOW = 200
DEFAULT_ALPHA = 1e-4
RECALIBRATION_PAIRS = 200
MIN_REFERENCE_PAIRS = 20
CHUNKS_PER_QUERY = 10
DESIGN_DRAWS = 400
MIN_DESIGN_QUERIES = 20

KOLMOGOROV_Q90 = 1.2238  # the 0.9 quantile of the Kolmogorov distribution
_LEVELS = np.linspace(0.0, 1.0, REFERENCE_QUANTILES)  # the probabilities of the stored quantiles

_thread_state = threading.local()


@contextmanager
def not_monitored() -> Iterator[None]:
    """Grades made inside (in this thread) are not fed to any shift monitor: texts that are not retrieved
    chunks, such as the corrective loop's sentence strips, would look like a shift of the data (on the demo
    they set off the alarm by their length alone)."""
    previous = monitoring_paused()
    _thread_state.paused = True
    try:
        yield
    finally:
        _thread_state.paused = previous


def monitoring_paused() -> bool:
    """True inside :func:`not_monitored` in this thread."""
    return bool(getattr(_thread_state, "paused", False))


def make_reference(logits: Any, lengths: Any, queries: Any = None, *, groups: Any = None,
                   window: int = DEFAULT_WINDOW, seed: int = 0) -> dict[str, Any]:
    """The bundle's reference: quantiles of calibration logits and chunk lengths (characters), and, given
    each pair's query, the design effects of windows of retrieval results (1.0 without queries, or with
    fewer than ``MIN_DESIGN_QUERIES``: then the test treats chunks as independent).

    Given each pair's ``groups`` (the calibration data's domains), each domain with enough pairs also gets a
    reference of its own: live data that looks like any one calibration domain is not a shift (the
    thresholds were chosen to hold in each), although one domain alone differs from their mixture."""
    x = np.asarray(logits, dtype=np.float64).ravel()
    n = np.asarray(lengths, dtype=np.float64).ravel()
    if x.size < MIN_REFERENCE_PAIRS or x.size != n.size or not np.all(np.isfinite(x)):
        raise ConfigError(f"a shift reference needs at least {MIN_REFERENCE_PAIRS} finite logits with lengths, "
                          f"got {x.size}")
    reference: dict[str, Any] = {"n": int(x.size), "logit_quantiles": np.quantile(x, _LEVELS).round(5).tolist(),
                                 "length_quantiles": np.quantile(n, _LEVELS).round(1).tolist()}
    if queries is not None:
        reference["design_effect"] = design_effects(x, n, np.asarray(queries).ravel(), window=window, seed=seed)
    if groups is not None:
        g = np.asarray(groups).ravel()
        if g.size != x.size:
            raise ConfigError(f"a shift reference needs one group per pair, got {g.size} for {x.size} pairs")
        masks = {str(name): g == name for name in np.unique(g)}
        masks = {name: mask for name, mask in masks.items() if mask.sum() >= MIN_REFERENCE_PAIRS}
        if len(masks) >= 2:
            q = None if queries is None else np.asarray(queries).ravel()
            reference["groups"] = {name: make_reference(x[mask], n[mask], None if q is None else q[mask],
                                                        window=window, seed=seed) for name, mask in masks.items()}
    return reference


def design_effects(logits: np.ndarray, lengths: np.ndarray, queries: np.ndarray, *, window: int = DEFAULT_WINDOW,
                   draws: int = DESIGN_DRAWS, seed: int = 0) -> dict[str, Any]:
    """How much more the KS distance of a live window varies than independent chunks would make it vary.

    Many times: split the queries in two, take the quantiles of one half as a reference, fill a window
    with retrieval results (up to ``CHUNKS_PER_QUERY`` chunks of a query) of the other half, and scale
    each KS distance by its effective size. The design effect is the squared ratio of the 0.9 quantile of
    those scaled distances to the Kolmogorov distribution's (at least 1)."""
    if queries.size != logits.size:
        raise ConfigError(f"design effects need one query per pair, got {queries.size} for {logits.size} pairs")
    names, codes = np.unique(queries, return_inverse=True)
    if names.size < MIN_DESIGN_QUERIES:
        return {"logit": 1.0, "length": 1.0, "queries": int(names.size), "chunks_per_query": CHUNKS_PER_QUERY,
                "note": f"fewer than {MIN_DESIGN_QUERIES} queries: chunks treated as independent"}
    rng = np.random.default_rng(seed)
    by_query = np.argsort(codes, kind="stable")  # the pairs of each query, without a pass per query
    members = np.split(by_query, np.cumsum(np.bincount(codes))[:-1])
    scaled: dict[str, list[float]] = {"logit": [], "length": []}
    for _ in range(draws):
        order = rng.permutation(names.size)
        half = names.size // 2
        ref = np.concatenate([members[q] for q in order[:half]])
        picked: list[int] = []
        for q in order[half:]:
            picked.extend(rng.permutation(members[q])[:CHUNKS_PER_QUERY].tolist())
            if len(picked) >= window:
                break
        win = np.asarray(picked[:window])
        ne = win.size * ref.size / (win.size + ref.size)
        for name, values in (("logit", logits), ("length", lengths)):
            d, _ = ks_two_sample(values[win], np.quantile(values[ref], _LEVELS), ref.size)
            scaled[name].append(math.sqrt(ne) * d)
    effects = {name: round(max(1.0, (float(np.quantile(z, 0.9)) / KOLMOGOROV_Q90) ** 2), 3)
               for name, z in scaled.items()}
    return {**effects, "queries": int(names.size), "chunks_per_query": CHUNKS_PER_QUERY, "draws": draws}


def _reference_cdf(quantiles: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The reference's CDF at ``values``, interpolated between its stored quantiles."""
    levels = np.linspace(0.0, 1.0, quantiles.size)
    q, idx = np.unique(quantiles, return_index=True)
    return np.interp(values, q, levels[idx], left=0.0, right=1.0)


def _kolmogorov_sf(lam: float) -> float:
    """P(K > lam) of the Kolmogorov distribution (the KS test's asymptotic p-value)."""
    if lam < 0.2:
        return 1.0
    total = sum((-1) ** (k - 1) * math.exp(-2.0 * k * k * lam * lam) for k in range(1, 101))
    return float(min(1.0, max(0.0, 2.0 * total)))


def ks_two_sample(sample: Any, reference_quantiles: Any, reference_n: int,
                  design_effect: float = 1.0, floor: float | None = None) -> tuple[float, float]:
    """KS statistic and p-value of ``sample`` against a reference given by its quantiles and size (the
    effective sample size divided by ``design_effect`` when the sample's draws are clustered).

    ``floor``: both distributions are compared censored at it (every value below counts as the floor): how
    much of each lies below it, and the shape of each above it. A grader that does not compute scores it knows
    to be below its lower threshold (:meth:`grader.cross_encoder.CrossEncoderGrader.grade`, ``settle_below``)
    reports them at the floor; the test then means the same whichever chunks were settled. The p-value stays
    conservative (a distribution with an atom makes the KS test conservative)."""
    x = np.sort(np.asarray(sample, dtype=np.float64).ravel())
    q = np.asarray(reference_quantiles, dtype=np.float64)
    if x.size == 0:
        return 0.0, 1.0
    if floor is not None:
        x = np.maximum(x, floor)
    ref = _reference_cdf(q, x)
    upper = np.arange(1, x.size + 1) / x.size
    lower = np.arange(0, x.size) / x.size
    if floor is not None:  # at the floor both sides' step is whole: compare only the share at or below it
        at_floor = x <= floor
        upper = np.where(at_floor, at_floor.sum() / x.size, upper)
        lower = np.where(at_floor, upper, lower)
    d = float(max(np.max(np.abs(upper - ref)), np.max(np.abs(lower - ref))))
    ne = x.size * reference_n / (x.size + reference_n) / design_effect
    lam = (math.sqrt(ne) + 0.12 + 0.11 / math.sqrt(ne)) * d
    return d, _kolmogorov_sf(lam)


@dataclass(frozen=True)
class ShiftStatus:
    """What the monitor knows now: whether the live window has moved, and how strongly."""

    shifted: bool
    seen: int
    checks: int
    window: int
    logit_statistic: float | None = None
    logit_p_value: float | None = None
    length_statistic: float | None = None
    length_p_value: float | None = None
    alpha: float = DEFAULT_ALPHA
    message: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class ShiftMonitor:
    """Bounded-window two-sample test of live scores against the bundle's reference (thread-safe)."""

    def __init__(self, reference: dict[str, Any], *, window: int = DEFAULT_WINDOW, check_every: int = 50,
                 alpha: float = DEFAULT_ALPHA, floor: float | None = None) -> None:
        if window < 20 or check_every < 1 or not 0.0 < alpha < 1.0:
            raise ConfigError(f"ShiftMonitor needs window >= 20, check_every >= 1 and alpha in (0, 1); got "
                              f"window={window}, check_every={check_every}, alpha={alpha}")
        if floor is not None and not math.isfinite(floor):
            raise ConfigError(f"ShiftMonitor's floor must be a finite score or None, got {floor!r}")
        self._parts = _reference_parts(reference)
        self.window, self.check_every, self.alpha = window, check_every, alpha
        self.floor = floor  # scores are compared censored at it (see ks_two_sample)
        self._logits: deque[float] = deque(maxlen=window)
        self._lengths: deque[float] = deque(maxlen=window)
        self._lock = threading.Lock()
        self._since_check = 0
        self._status = ShiftStatus(shifted=False, seen=0, checks=0, window=window, alpha=alpha)

    def observe(self, logits: Any, lengths: Any) -> ShiftStatus:
        """Add live scores; returns the status after any check this triggered."""
        with self._lock:
            for logit, length in zip(np.ravel(logits), np.ravel(lengths), strict=True):
                if math.isfinite(float(logit)):
                    self._logits.append(float(logit))
                    self._lengths.append(float(length))
                    self._since_check += 1
            seen = self._status.seen + int(np.size(logits))
            status = ShiftStatus(**{**self._status.to_dict(), "seen": seen})
            if len(self._logits) >= self.window and self._since_check >= self.check_every:
                self._since_check = 0
                status = self._check(seen, status.checks + 1, status.shifted)
            self._status = status
            return status

    def _check(self, seen: int, checks: int, already: bool) -> ShiftStatus:
        test = _test(list(self._logits), list(self._lengths), self._parts, self.alpha, already, self.floor)
        return ShiftStatus(seen=seen, checks=checks, window=self.window, **test)

    def status(self) -> ShiftStatus:
        with self._lock:
            return self._status


_Part = tuple[str, np.ndarray, np.ndarray, int, tuple[float, float]]
POOLED = "all of them pooled"  # the name of the reference's part that is the whole calibration data


def _reference_parts(reference: dict[str, Any]) -> list[_Part]:
    """(name, logit quantiles, length quantiles, pairs summarised, design effects) of the whole calibration
    data, then of each of its domains; a clear error if malformed. A reference written before design
    effects existed has them at 1; one written before domains has only the whole."""
    try:
        effects = reference.get("design_effect") or {}
        design = (float(effects.get("logit", 1.0)), float(effects.get("length", 1.0)))
        if min(design) < 1.0:
            raise ValueError(f"design effects must be >= 1, got {design}")
        parts: list[_Part] = [(POOLED, np.asarray(reference["logit_quantiles"], dtype=np.float64),
                               np.asarray(reference["length_quantiles"], dtype=np.float64), int(reference["n"]),
                               design)]
        for name, sub in (reference.get("groups") or {}).items():
            if "groups" in sub:
                raise ValueError(f"domain {name!r} has domains of its own")
            parts.append((str(name), *_reference_parts(sub)[0][1:]))
        return parts
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"invalid shift reference in the bundle manifest: {exc}") from exc


def _test(logits: Any, lengths: Any, parts: list[_Part], alpha: float, already: bool = False,
          floor: float | None = None) -> dict[str, Any]:
    """The two KS tests against every part of the reference and the verdict (fields of a ShiftStatus): the
    data has moved only if it differs from the whole calibration data and from each of its domains. The
    statistics reported are those of the closest part. ``floor``: the scores are compared censored at it."""
    tests = []
    for name, logit_q, length_q, ref_n, effects in parts:
        d_logit, p_logit = ks_two_sample(logits, logit_q, ref_n, effects[0], floor)
        d_len, p_len = ks_two_sample(lengths, length_q, ref_n, effects[1])
        tests.append((min(p_logit, p_len), name, d_logit, p_logit, d_len, p_len))
    closest, name, d_logit, p_logit, d_len, p_len = max(tests, key=lambda t: t[0])
    shifted = already or closest < alpha / 2.0
    against = "its calibration data" if len(parts) == 1 else (
        f"each of its {len(parts) - 1} calibration domains (closest: {name})")
    message = (f"the grader's scores on this data differ from {against} (KS p={p_logit:.1e} on "
               f"scores, p={p_len:.1e} on chunk lengths): its thresholds may no longer hold their error "
               f"target here; recalibrate with `crag calibrate` on ~{RECALIBRATION_PAIRS} labelled pairs of "
               "this data (`crag calibrate --suggest` picks which to label)") if shifted else ""
    return {"shifted": shifted, "logit_statistic": d_logit, "logit_p_value": p_logit, "length_statistic": d_len,
            "length_p_value": p_len, "alpha": alpha, "message": message}


def compare_to_reference(reference: dict[str, Any], logits: Any, lengths: Any, *,
                         alpha: float = DEFAULT_ALPHA) -> ShiftStatus:
    """One test of a whole data set (``crag eval``) against the bundle's reference."""
    parts = _reference_parts(reference)
    finite = np.isfinite(np.asarray(logits, dtype=np.float64))
    kept_logits = np.asarray(logits, dtype=np.float64)[finite]
    kept_lengths = np.asarray(lengths, dtype=np.float64)[finite]
    return ShiftStatus(seen=int(kept_logits.size), checks=1, window=int(kept_logits.size),
                       **_test(kept_logits, kept_lengths, parts, alpha))
