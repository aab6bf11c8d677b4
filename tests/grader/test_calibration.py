import numpy as np
import pytest

from grader.calibration import (
    IdentityCalibrator,
    IsotonicCalibrator,
    PlattCalibrator,
    TemperatureCalibrator,
    calibrator_from_dict,
    fit_calibrator,
)
from models import ConfigError, NotFittedError
from training.metrics import expected_calibration_error


def _data(n=4000, seed=0):
    rng = np.random.default_rng(seed)
    true_logit = rng.normal(0, 2, n)
    y = (rng.random(n) < 1 / (1 + np.exp(-true_logit))).astype(int)
    return 3.0 * true_logit + 1.0, y  # overconfident, shifted raw logits


@pytest.mark.parametrize("method", ["temperature", "platt", "isotonic"])
def test_calibration_reduces_ece_and_roundtrips(method):
    x, y = _data()
    raw_ece = expected_calibration_error(IdentityCalibrator().predict(x), y)
    cal = fit_calibrator(method, x, y)
    assert cal.method == method
    p = cal.predict(x)
    assert np.all((p >= 0) & (p <= 1))
    assert expected_calibration_error(p, y) < raw_ece / 2
    again = calibrator_from_dict(cal.to_dict())
    np.testing.assert_allclose(again.predict(x), p)


def test_platt_recovers_the_scale():
    x, y = _data(20000)
    cal = PlattCalibrator().fit(x, y)
    assert cal.a_ == pytest.approx(1 / 3, rel=0.1)


def test_auto_picks_by_size():
    x, y = _data(6000)
    assert fit_calibrator("auto", x, y).method == "isotonic"
    assert fit_calibrator("auto", x[:500], y[:500]).method == "platt"


def test_errors():
    for cal in (TemperatureCalibrator(), PlattCalibrator(), IsotonicCalibrator()):
        with pytest.raises(NotFittedError):
            cal.predict(np.zeros(2))
    with pytest.raises(ConfigError, match="both classes"):
        PlattCalibrator().fit([0.1, 0.2], [1, 1])
    with pytest.raises(ConfigError, match="one label per logit"):
        PlattCalibrator().fit([0.1, 0.2], [1])
    with pytest.raises(ConfigError, match="unknown calibration method"):
        fit_calibrator("magic", [0.1, 0.2], [0, 1])
    with pytest.raises(ConfigError, match="needs finite logits; 1 of the 4 are NaN or infinite"):
        PlattCalibrator().fit([0.1, float("nan"), 0.3, 0.4], [1, 0, 1, 0])  # said "at least 2 finite logits, got 4"
    with pytest.raises(ConfigError, match="malformed"):
        calibrator_from_dict({"method": "platt", "params": {}})
    assert calibrator_from_dict({}).method == "identity"
