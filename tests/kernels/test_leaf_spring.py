"""The leaf-spring axle (configs/model/leaf_spring_axle.yaml): Rill's
five-link leaf (seed 004) checked as a chassis engineer would, against an
independent beam model of the same leaves (tests/kernels/leaf_beam.py, the
Adams approach: 20 Euler-Bernoulli elements per leaf, numpy only).

Measured (this machine, 2026-11-26), five-link against beam, at the design
state under the design wheel load, every other axle DOF free:
  vertical rate per side 118.9 vs 121.8 kN/m   -2.4 %
  wind-up (axle pitch)    51.4 vs  52.3 kN m/rad -1.7 %
  lateral rate           755.8 vs 788.1 kN/m    -4.1 %
  roll rate               65.5 vs  67.1 kN m/rad -2.4 %
  fore-aft rate         3784   vs 3981 kN/m     -4.9 %
  yaw rate              3745   vs 4318 kN m/rad -13.3 %
  roll steer (axle yaw per roll) 0.0542 vs 0.0529  +2.5 %
The tolerances below hold these differences (seed 004's claim that the
five links are accurate holds within 5 % except the axle's yaw rate: the
five links bend laterally at four joints, the beam everywhere).
"""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import kernels  # noqa: F401  (float64)
from tests.kernels import leaf_beam
from tests.conftest import load_model_cfg
from kernels import kc, statics
from kernels.dynamics import generalised_forces
from kernels.model import ModelError, build_model
from sweep.axle.builder import build_tables

NAME = "leaf_spring_axle"


# ----------------------------------------------------------------------------- the oracle itself (fast)

def test_beam_element_against_cantilever_and_euler_buckling():
    """The oracle's frame element against closed forms: a cantilever of 10
    elements under a tip load deflects P L^3 / (3 EI) in both bending planes,
    twists T L / GJ, and a pinned column under compression buckles at
    pi^2 EI / L^2 (the geometric stiffness)."""
    L, n, EA, GJ, EIy, EIz = 1.0, 10, 1e8, 50.0, 200.0, 3000.0
    le = L / n
    K = np.zeros((6 * (n + 1), 6 * (n + 1)))
    for i in range(n):
        s = slice(6 * i, 6 * i + 12)
        K[s, s] += leaf_beam.beam_element(le, EA, GJ, EIy, EIz, 0.0)
    free = np.arange(6, 6 * (n + 1))
    f = np.zeros(6 * (n + 1))
    f[-6 + 1], f[-6 + 2], f[-6 + 3] = 1.0, 1.0, 1.0       # tip: Fy, Fz, torque
    d = np.linalg.solve(K[np.ix_(free, free)], f[free])
    assert d[-6 + 1] == pytest.approx(L ** 3 / (3 * EIz), rel=1e-9)
    assert d[-6 + 2] == pytest.approx(L ** 3 / (3 * EIy), rel=1e-9)
    assert d[-6 + 3] == pytest.approx(L / GJ, rel=1e-9)
    # pinned-pinned column in the x-z plane: w = 0 at both ends
    Kg = np.zeros_like(K)
    for i in range(n):
        s = slice(6 * i, 6 * i + 12)
        Kg[s, s] += leaf_beam.beam_element(le, 0.0, 0.0, 0.0, 0.0, -1.0)     # unit compression
    keep = [j for j in range(6 * (n + 1)) if j % 6 in (2, 4) and j not in (2, 6 * n + 2)]
    lam = np.linalg.eigvals(np.linalg.solve(-Kg[np.ix_(keep, keep)], K[np.ix_(keep, keep)]))
    assert lam.real.min() == pytest.approx(np.pi ** 2 * EIy / L ** 2, rel=1e-3)


def test_rigid_geometric_stiffness_is_the_pendulum():
    """A pendulum (mass m at L below its pivot) under gravity: m g L about
    both horizontal axes, nothing about the vertical."""
    K = leaf_beam.rigid_geometric([(np.array([0.0, 0.0, -9.81 * 2.0]), np.array([0.0, 0.0, -0.5]))])
    assert np.allclose(K, np.diag([9.81, 9.81, 0.0]))


# ----------------------------------------------------------------------------- the axle (full tier)


# (rate, tolerance): the measured difference (module docstring) with ~1 % margin
TOLERANCES = {"vertical_per_side": 0.035, "windup": 0.03, "lateral": 0.05, "roll": 0.035,
              "fore_aft": 0.06, "yaw": 0.15, "roll_steer": 0.035}


KC_TOLERANCES = {"wheel_rate": 0.05, "wind_up": 0.05, "axle_lateral_compliance": 0.07, "axle_roll_steer": 0.05}


# ----------------------------------------------------------------------------- the longitudinal step against Radau

# NMSE (mean((y - y_ref)^2) / mean(y_ref)^2 over 4.9-6.0 s, both sides
# pooled) of LSRT2 h = 1 ms against Radau (rtol 1e-6, atol 1e-9 m, 1e-6 m/s)
# on the longitudinal step at the design wheel load, measured 2026-11-27;
# the test holds it within [measured / 10, 3 x measured]. Re-measure (the
# test prints it) after a change of the model or the method.
MEASURED_NMSE = {"wheel_displacement": 8.6e-9, "bushing_force": 1.3e-8}


