"""Point-to-point elements (spring, damper, bump and rebound stop) against hand
calculations on two toy bodies (method.md section 1; kernels.forces.p2p_*).

The element joins marker m1 on body a (vehicle point (0.2, 0.1, 0)) and m3 on
body b (vehicle point (0.6, 0.3, -0.1) at the design pose; body b is rotated).
Body b is translated along the element line to set the compression travel
s = L_ref - L, and given a velocity along it to set dL/dt. Expected forces are
written out here from the laws of kernels.forces.p2p_law_parameters's docstring:
tension T (> 0 pulls the markers together) = damper force - push,
push(s) = preload + k s (or the table), stops zero before their clearance.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import kernels  # noqa: F401  (float64)
from kernels import forces
from kernels.model import build_model
from kernels.rotations import euler_to_matrix
from tests.kernels.test_elements import states, two_body_tables

P1 = np.array([0.2, 0.1, 0.0])
P2 = np.array([0.6, 0.3, -0.1])
L0 = float(np.linalg.norm(P2 - P1))
E = (P2 - P1) / L0


def element(p2p, **overrides):
    model = build_model(two_body_tables(p2p=p2p))
    prm = jax.tree_util.tree_map(lambda a: a[0], model.elements["p2p"])
    prm = dict(prm, **{k: jnp.asarray(v, prm[k].dtype) for k, v in overrides.items()})
    return model, prm


def loads(model, prm, s=0.0, ldot=0.0):
    """Generalised forces (g1, g2) and tension at compression travel s [m] and rate dL/dt [m/s]."""
    x1, x2 = states(model, dx=np.concatenate([-s * E, np.zeros(3)]), v2=np.concatenate([ldot * E, np.zeros(3)]))
    g1, g2 = forces.p2p_element(prm, x1, x2)
    T, L, Ld, _ = forces.p2p_tension(prm, x1, x2)
    np.testing.assert_allclose(float(L), L0 - s, rtol=1e-14)
    np.testing.assert_allclose(float(Ld), ldot, rtol=1e-12, atol=1e-15)
    return np.asarray(g1), np.asarray(g2), float(T), (x1, x2)


def tension(p2p, s=0.0, ldot=0.0, **overrides):
    model, prm = element(p2p, **overrides)
    return loads(model, prm, s, ldot)[2]


# ----------------------------------------------------------------------------- springs

@pytest.mark.parametrize("s", [-0.03, -0.004, 0.0, 0.002, 0.015, 0.05])
def test_linear_spring_with_preload(s):
    k, f0 = 2.5e4, 300.0
    assert tension({"kind": "spring", "stiffness": k, "preload": f0}, s) == pytest.approx(-(f0 + k * s), rel=1e-12)


def test_linear_spring_rate_scaling_keeps_the_force_at_design():
    k, f0 = 2.5e4, 300.0
    spring = {"kind": "spring", "stiffness": k, "preload": f0}
    for s in (-0.02, 0.0, 0.01):
        assert tension(spring, s, k_scale=1.7) == pytest.approx(-(f0 + 1.7 * k * s), rel=1e-12, abs=1e-9)


CURVE = {"x": [-0.02, 0.0, 0.01, 0.03, 0.05], "y": [-200.0, 1000.0, 1600.0, 3600.0, 9000.0]}


def test_tabulated_spring_at_knots_and_beyond():
    spring = {"kind": "spring", "curve": CURVE}
    for x, y in zip(CURVE["x"], CURVE["y"]):       # Hermite curves pass through their knots
        assert tension(spring, x) == pytest.approx(-y, rel=1e-12)
    # outside the table: straight line with the end segment's secant slope
    slope_hi = (9000.0 - 3600.0) / 0.02
    slope_lo = (1000.0 - (-200.0)) / 0.02
    assert tension(spring, 0.06) == pytest.approx(-(9000.0 + slope_hi * 0.01), rel=1e-12)
    assert tension(spring, -0.03) == pytest.approx(-(-200.0 - slope_lo * 0.01), rel=1e-12)
    # rate scaling keeps the force at s = 0 (1000 N, the design preload of the table)
    for x, y in zip(CURVE["x"], CURVE["y"]):
        assert tension(spring, x, k_scale=0.6) == pytest.approx(-(1000.0 + 0.6 * (y - 1000.0)), rel=1e-12)


def test_tabulated_collinear_table_is_linear_between_knots():
    """A straight-line table gives a straight line (monotone Hermite slopes = secants)."""
    spring = {"kind": "spring", "curve": {"x": [0.0, 0.01, 0.02, 0.04], "y": [500.0, 700.0, 900.0, 1300.0]}}
    for s in (0.003, 0.013, 0.031):
        assert tension(spring, s) == pytest.approx(-(500.0 + 2e4 * s), rel=1e-12)


# ----------------------------------------------------------------------------- dampers

@pytest.mark.parametrize("ldot", [-0.8, -0.05, -1e-3, -2e-4, 0.0, 3e-4, 1e-3, 0.02, 0.6])
def test_linear_damper_with_compression_rebound_scaling(ldot):
    """Compression / rebound factors blended over |dL/dt| ~ 1 mm/s (the
    width written out here, not read from kernels.forces: the points inside
    the blend check it)."""
    c, cc, cr = 2000.0, 0.7, 1.4
    w = 0.5 * (1.0 + np.tanh(ldot / 1e-3))   # rebound weight, blend width 1e-3 m/s
    expected = c * ldot * (cc + (cr - cc) * w)
    got = tension({"kind": "damper", "damping": c}, 0.004, ldot, c_scale=[cc, cr])
    assert got == pytest.approx(expected, rel=1e-12, abs=1e-12)
    if abs(ldot) >= 0.02:   # outside the blend: the plain compression / rebound factor
        assert got == pytest.approx(c * ldot * (cr if ldot > 0 else cc), rel=1e-12)


def test_tabulated_damper():
    curve = {"x": [-1.0, -0.2, 0.0, 0.3, 1.0], "y": [-1500.0, -500.0, 0.0, 800.0, 1800.0]}
    for x, y in zip(curve["x"], curve["y"]):
        # no spring part: T is the damper force alone (tension in rebound)
        expected = y * (0.9 if x < 0 else 1.2) if x != 0 else 0.0
        got = tension({"kind": "damper", "curve": curve}, 0.0, x, c_scale=[0.9, 1.2])
        assert got == pytest.approx(expected, rel=1e-12, abs=1e-12)


# ----------------------------------------------------------------------------- stops

STOP = {"x": [0.0, 0.002, 0.01, 0.02], "y": [0.0, 200.0, 1000.0, 2500.0]}


def test_bump_stop_zero_before_clearance_then_curve():
    bump = {"kind": "bump_stop", "clearance": 0.015, "curve": STOP}
    for s in (-0.05, 0.0, 0.01, 0.0149):
        assert tension(bump, s) == 0.0
    assert abs(tension(bump, 0.015)) < 1e-6   # continuous at engagement (round-off of L)
    for x, y in zip(STOP["x"], STOP["y"]):
        assert tension(bump, 0.015 + x) == pytest.approx(-y, rel=1e-12, abs=1e-9)
    slope = (2500.0 - 1000.0) / 0.01
    assert tension(bump, 0.015 + 0.03) == pytest.approx(-(2500.0 + slope * 0.01), rel=1e-12)


def test_rebound_stop_zero_before_clearance_then_curve():
    reb = {"kind": "rebound_stop", "clearance": 0.008, "curve": STOP}
    for s in (0.05, 0.0, -0.005, -0.0079):
        assert tension(reb, s) == 0.0
    assert abs(tension(reb, -0.008)) < 1e-6
    for x, y in zip(STOP["x"], STOP["y"]):
        assert tension(reb, -(0.008 + x)) == pytest.approx(y, rel=1e-12, abs=1e-9)


# ----------------------------------------------------------------------------- loads on the bodies

@pytest.mark.parametrize("p2p,s,ldot", [
    ({"kind": "spring", "stiffness": 3e4, "preload": 200.0}, 0.01, 0.0),       # push: T < 0
    ({"kind": "rebound_stop", "clearance": 0.0, "curve": STOP}, -0.01, 0.0),   # pull: T > 0
    ({"kind": "damper", "damping": 1500.0}, 0.0, 0.3),
])
def test_force_direction_and_moment_balance(p2p, s, ldot):
    """F = T e on body 1 at marker 1 (e: unit vector marker 1 -> marker 2), -F on
    body 2 at marker 2; torques in the body frames; no net force or moment."""
    model, prm = element(p2p)
    g1, g2, T, (x1, x2) = loads(model, prm, s, ldot)
    assert abs(T) > 10.0
    pm1 = P1                                 # body 1 does not move
    pm2 = P2 - s * E
    F = T * E
    np.testing.assert_allclose(g1[:3], F, rtol=1e-12, atol=1e-12 * abs(T))
    np.testing.assert_allclose(g2[:3], -F, rtol=1e-12, atol=1e-12 * abs(T))
    R1 = np.asarray(euler_to_matrix(x1[3:6]))
    R2 = np.asarray(euler_to_matrix(x2[3:6]))
    p1, p2 = np.asarray(x1[:3]), np.asarray(x2[:3])
    np.testing.assert_allclose(g1[3:], R1.T @ np.cross(pm1 - p1, F), atol=1e-12 * abs(T))
    np.testing.assert_allclose(g2[3:], R2.T @ np.cross(pm2 - p2, -F), atol=1e-12 * abs(T))
    # moment about the origin of both loads together
    mom = np.cross(p1, g1[:3]) + R1 @ g1[3:] + np.cross(p2, g2[:3]) + R2 @ g2[3:]
    np.testing.assert_allclose(mom, 0.0, atol=1e-12 * abs(T))
    # a push (T < 0) drives the markers apart: body 1's force points away from marker 2
    assert np.sign(np.dot(g1[:3], pm2 - pm1)) == np.sign(T)
