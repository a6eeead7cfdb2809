"""Frequency and time domain agree on the double wishbone with tyres: the
PSD of the wheel centre's vertical motion over a rough road equals
|H(f)|^2 times the road's PSD (tests/kernels/test_road.py, :func:`psd_ratio`;
the anti-roll bar couples the sides, so the cross terms count)."""
import numpy as np
import pytest

from tests.kernels.test_road import assert_agrees, psd_ratio

pytestmark = pytest.mark.slow


def linear_damper(cfg):
    """The linear variant of the double wishbone: its damper's published
    curve (compression 3460, rebound 2115 N s/m near rest: a bilinear law,
    nonlinear at any amplitude) replaced by the mean of the two slopes."""
    damper = cfg["per_side"]["p2p"]["damper"]
    damper.pop("curve")
    damper["damping"] = 2800.0


def test_double_wishbone_rough_road_psd_equals_frf_squared_times_road_psd():
    """Its linear variant (:func:`linear_damper`) on a class A road, 10 s,
    1-30 Hz (:func:`assert_agrees`)."""
    assert_agrees(psd_ratio("double_wishbone", T=10.0, road_class="A", edit=linear_damper))


def test_the_published_damper_is_not_linear():
    """Why the linear variant: with the published (bilinear) damper the
    same comparison is off by more than 20 % somewhere in 1-30 Hz (so the
    test above can tell a linear response from a nonlinear one)."""
    assert np.abs(psd_ratio("double_wishbone", T=10.0, road_class="A") - 1.0).max() > 0.2
