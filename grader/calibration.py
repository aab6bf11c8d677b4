"""Calibrators that map raw logits to calibrated P(relevant or partial).

Sklearn-style: ``fit(logits, labels) -> self`` with trailing-underscore state and :class:`NotFittedError`
before fit. Fitting uses scikit-learn/scipy (the ``eval`` extra); ``predict`` needs numpy only, so a
loaded bundle is calibrated at inference without sklearn. ``to_dict``/``from_dict`` round-trip the
state through the bundle manifest.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from models.deps import require
from models.errors import ConfigError, NotFittedError

__all__ = [
    "CALIBRATION_METHODS",
    "Calibrator",
    "IdentityCalibrator",
    "IsotonicCalibrator",
    "PlattCalibrator",
    "TemperatureCalibrator",
    "calibrator_from_dict",
    "fit_calibrator",
]

CALIBRATION_METHODS = ("auto", "temperature", "platt", "isotonic")
ISOTONIC_MIN_PAIRS = 5000


class Calibrator(Protocol):
    """Maps logits to probabilities."""

    method: str

    def predict(self, logits: np.ndarray) -> np.ndarray: ...

    def to_dict(self) -> dict[str, Any]: ...


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-np.clip(x, -60.0, 60.0))), dtype=np.float64)


def _check_xy(logits: Any, labels: Any) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(logits, dtype=np.float64).ravel()
    y = np.asarray(labels, dtype=np.float64).ravel()
    if x.shape != y.shape:
        raise ConfigError(f"calibration needs one label per logit, got {x.size} logits and {y.size} labels")
    if x.size < 2:
        raise ConfigError(f"calibration needs at least 2 logits, got {x.size}")
    if not np.all(np.isfinite(x)):
        raise ConfigError(f"calibration needs finite logits; {int(np.sum(~np.isfinite(x)))} of the {x.size} are "
                          "NaN or infinite")
    if not np.all((y == 0) | (y == 1)):
        raise ConfigError("calibration labels must be 0 or 1")
    if y.min() == y.max():
        raise ConfigError(f"calibration needs both classes; all {y.size} labels are {int(y[0])}")
    return x, y


class IdentityCalibrator:
    """Plain sigmoid of the logit: for untrained or uncalibrated bundles."""

    method = "identity"

    def predict(self, logits: np.ndarray) -> np.ndarray:
        return _sigmoid(np.asarray(logits, dtype=np.float64))

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "params": {}}


class TemperatureCalibrator:
    """p = sigmoid(logit / T): one parameter, keeps the ranking and the 0.5 point."""

    method = "temperature"

    def __init__(self, temperature: float | None = None) -> None:
        self.temperature_ = temperature

    def fit(self, logits: Any, labels: Any, sample_weight: Any = None) -> TemperatureCalibrator:
        x, y = _check_xy(logits, labels)
        w = _weights(sample_weight, x.size)
        optimize = require("scipy.optimize", "eval")

        def nll(log_t: float) -> float:
            p = np.clip(_sigmoid(x / np.exp(log_t)), 1e-12, 1 - 1e-12)
            return float(-np.average(y * np.log(p) + (1 - y) * np.log(1 - p), weights=w))

        result = optimize.minimize_scalar(nll, bounds=(-5.0, 5.0), method="bounded")
        self.temperature_ = float(np.exp(result.x))
        return self

    def predict(self, logits: np.ndarray) -> np.ndarray:
        if self.temperature_ is None:
            raise NotFittedError("TemperatureCalibrator is not fitted; call fit(logits, labels) first")
        return _sigmoid(np.asarray(logits, dtype=np.float64) / self.temperature_)

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "params": {"temperature": self.temperature_}}


class PlattCalibrator:
    """p = sigmoid(a * logit + b), fitted by scikit-learn's logistic regression."""

    method = "platt"

    def __init__(self, a: float | None = None, b: float | None = None) -> None:
        self.a_ = a
        self.b_ = b

    def fit(self, logits: Any, labels: Any, sample_weight: Any = None) -> PlattCalibrator:
        x, y = _check_xy(logits, labels)
        linear_model = require("sklearn.linear_model", "eval")
        model = linear_model.LogisticRegression(C=1e4, max_iter=1000)
        model.fit(x.reshape(-1, 1), y.astype(int), sample_weight=_weights(sample_weight, x.size))
        self.a_ = float(model.coef_[0, 0])
        self.b_ = float(model.intercept_[0])
        return self

    def predict(self, logits: np.ndarray) -> np.ndarray:
        if self.a_ is None or self.b_ is None:
            raise NotFittedError("PlattCalibrator is not fitted; call fit(logits, labels) first")
        return _sigmoid(self.a_ * np.asarray(logits, dtype=np.float64) + self.b_)

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "params": {"a": self.a_, "b": self.b_}}


class IsotonicCalibrator:
    """Monotone step calibration (scikit-learn isotonic regression); needs plenty of data.

    Stored as the fitted breakpoints so that prediction is a numpy interpolation. Steps are
    blended with a tiny Platt slope so that equal-probability ties do not destroy the ranking.
    """

    method = "isotonic"

    def __init__(self, x: list[float] | None = None, y: list[float] | None = None) -> None:
        self.x_ = None if x is None else np.asarray(x, dtype=np.float64)
        self.y_ = None if y is None else np.asarray(y, dtype=np.float64)

    def fit(self, logits: Any, labels: Any, sample_weight: Any = None) -> IsotonicCalibrator:
        x, y = _check_xy(logits, labels)
        isotonic = require("sklearn.isotonic", "eval")
        model = isotonic.IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip")
        model.fit(x, y, sample_weight=_weights(sample_weight, x.size))
        self.x_ = np.asarray(model.X_thresholds_, dtype=np.float64)
        self.y_ = np.clip(np.asarray(model.y_thresholds_, dtype=np.float64), 1e-4, 1 - 1e-4)
        return self

    def predict(self, logits: np.ndarray) -> np.ndarray:
        if self.x_ is None or self.y_ is None:
            raise NotFittedError("IsotonicCalibrator is not fitted; call fit(logits, labels) first")
        return np.asarray(np.interp(np.asarray(logits, dtype=np.float64), self.x_, self.y_), dtype=np.float64)

    def to_dict(self) -> dict[str, Any]:
        if self.x_ is None or self.y_ is None:
            raise NotFittedError("IsotonicCalibrator is not fitted")
        return {"method": self.method, "params": {"x": self.x_.tolist(), "y": self.y_.tolist()}}


def _weights(sample_weight: Any, n: int) -> np.ndarray:
    if sample_weight is None:
        return np.ones(n)
    w = np.asarray(sample_weight, dtype=np.float64).ravel()
    if w.size != n or not np.all(np.isfinite(w)) or (w < 0).any() or w.sum() <= 0:
        raise ConfigError(f"sample weights must be {n} finite non-negative numbers, not all zero")
    return w


def fit_calibrator(method: str, logits: Any, labels: Any, sample_weight: Any = None) -> Calibrator:
    """Fit the named calibrator; ``auto`` picks isotonic from 5,000 pairs up, else Platt. ``sample_weight``
    lets noisier labels (an LLM's) count for less than a person's."""
    if method not in CALIBRATION_METHODS:
        raise ConfigError(f"unknown calibration method {method!r}; choose one of {list(CALIBRATION_METHODS)}")
    if method == "auto":
        method = "isotonic" if np.asarray(logits).size >= ISOTONIC_MIN_PAIRS else "platt"
    if method == "temperature":
        return TemperatureCalibrator().fit(logits, labels, sample_weight)
    if method == "platt":
        return PlattCalibrator().fit(logits, labels, sample_weight)
    return IsotonicCalibrator().fit(logits, labels, sample_weight)


def calibrator_from_dict(data: dict[str, Any] | None) -> Calibrator:
    """Rebuild a calibrator from its manifest entry; an empty entry means plain sigmoid."""
    if not data:
        return IdentityCalibrator()
    method = data.get("method")
    params = data.get("params") or {}
    try:
        if method == "identity":
            return IdentityCalibrator()
        if method == "temperature":
            return TemperatureCalibrator(float(params["temperature"]))
        if method == "platt":
            return PlattCalibrator(float(params["a"]), float(params["b"]))
        if method == "isotonic":
            return IsotonicCalibrator([float(v) for v in params["x"]], [float(v) for v in params["y"]])
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"calibration entry {data!r:.200} is malformed: {exc}") from exc
    raise ConfigError(f"unknown calibration method {method!r} in manifest; expected one of {list(CALIBRATION_METHODS)}")
