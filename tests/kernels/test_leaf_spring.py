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
import leaf_beam
from conftest import load_model_cfg
from kernels import kc, statics
from kernels.dynamics import generalised_forces
from kernels.model import ModelError, build_model
from sweep.model_builder import build_tables

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
        K[s, s] += leaf_beam._beam_element(le, EA, GJ, EIy, EIz, 0.0)
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
        Kg[s, s] += leaf_beam._beam_element(le, 0.0, 0.0, 0.0, 0.0, -1.0)     # unit compression
    keep = [j for j in range(6 * (n + 1)) if j % 6 in (2, 4) and j not in (2, 6 * n + 2)]
    lam = np.linalg.eigvals(np.linalg.solve(-Kg[np.ix_(keep, keep)], K[np.ix_(keep, keep)]))
    assert lam.real.min() == pytest.approx(np.pi ** 2 * EIy / L ** 2, rel=1e-3)


def test_rigid_geometric_stiffness_is_the_pendulum():
    """A pendulum (mass m at L below its pivot) under gravity: m g L about
    both horizontal axes, nothing about the vertical."""
    K = leaf_beam._rigid_geometric([(np.array([0.0, 0.0, -9.81 * 2.0]), np.array([0.0, 0.0, -0.5]))])
    assert np.allclose(K, np.diag([9.81, 9.81, 0.0]))


# ----------------------------------------------------------------------------- the axle (full tier)

@pytest.fixture(scope="module")
def leaf():
    cfg = load_model_cfg(NAME)
    model = build_model(build_tables(cfg))
    return cfg, model


def _axle_stiffness(model, r, u):
    """The axle's 6x6 stiffness of the kernels' model at r (every other body
    condensed out): -dQ/dr of the generalised forces by autodiff, the axle's
    Euler-angle columns turned into small rotations."""
    m = model.topology.n_bodies
    q = jax.jit(jax.jacfwd(lambda x: generalised_forces(model, x.reshape(m, 6), jnp.zeros((m, 6)), u)
                           .reshape(-1)))
    K = -np.asarray(q(r.reshape(-1)))
    T = np.eye(6 * m)
    T[3:6, 3:6] = np.linalg.inv(np.asarray(kc._wheel_rotation_rates(r[0, 3:])))
    K = K @ T
    o = np.arange(6, 6 * m)
    return K[:6, :6] - K[:6, o] @ np.linalg.solve(K[np.ix_(o, o)], K[o][:, :6])


def _rates(K):
    """Rates at the axle's centre of mass, the other DOFs free (loads only in
    the one direction)."""
    C = np.linalg.inv(K)
    return {"vertical_per_side": 1 / C[2, 2] / 2, "windup": 1 / C[4, 4], "lateral": 1 / C[1, 1],
            "roll": 1 / C[3, 3], "fore_aft": 1 / C[0, 0], "yaw": 1 / C[5, 5],
            "roll_steer": C[5, 3] / C[3, 3]}


@pytest.mark.validation
def test_design_state_and_stops_clear(leaf):
    """The design geometry IS the static state under the design wheel load
    (the pretension of the YAML), both sides, with every stop 80 mm clear
    and toe and camber 0; the design-position solve (wheel centres held at
    their design heights) finds the design wheel load."""
    cfg, model = leaf
    W = cfg["alignment"]["wheel_load"]
    u = jnp.zeros((2, 6)).at[:, 2].set(W)
    eq = statics.static_equilibrium(model, u)
    assert bool(eq.converged)
    assert float(jnp.max(jnp.abs(eq.r - model.r_design))) < 1e-6      # m, rad
    dp = kc.design_position(model)
    assert bool(dp.converged)
    assert np.allclose(np.asarray(dp.fz), W, atol=0.05)
    lengths = np.asarray(kc.p2p_lengths(model, eq.r))
    names = [p["name"] for p in build_tables(cfg)["p2p"]]
    for name, length in zip(names, lengths):
        if "stop" in name:
            assert length == pytest.approx(0.2, abs=1e-6), name    # clearance 0.080 m both ways
    from kernels import metrics
    toe, camber = metrics.toe_camber(model, eq.r)
    assert np.allclose(np.asarray(toe), 0.0, atol=1e-9) and np.allclose(np.asarray(camber), 0.0, atol=1e-9)


@pytest.mark.validation
def test_pretension_of_the_yaml_is_current(leaf):
    """`python -m sweep.align leaf_spring_axle` reproduces the YAML's
    preloads; a pretension that cannot hold the axle is refused by name."""
    from sweep.align import pretension
    cfg, _ = leaf
    values, res = pretension(cfg)
    assert res < 1e-6
    for name, row in values.items():
        assert np.allclose(row, cfg["per_side"]["bushings"][name]["preload"], atol=1e-3), name
    import copy
    bad = copy.deepcopy(cfg)
    for spec in bad["per_side"]["bushings"].values():
        spec.pop("preload", None)
    bad["alignment"]["pretension"] = {"front_eye": ["x", "y"]}
    with pytest.raises(ModelError, match="cannot hold the design geometry"):
        pretension(bad)


@pytest.fixture(scope="module")
def rates(leaf):
    cfg, model = leaf
    u = jnp.zeros((2, 6)).at[:, 2].set(cfg["alignment"]["wheel_load"])
    eq = statics.static_equilibrium(model, u)
    K5 = _axle_stiffness(model, eq.r, u)
    Kb, _ = leaf_beam.axle_stiffness(cfg)
    return K5, Kb


@pytest.mark.validation
def test_all_six_axle_freedoms_held(rates):
    """A leaf axle is guided compliantly: no free mechanism, all six axle
    freedoms restrained (the smallest, wind-up, ~5e4 N m/rad)."""
    K5, _ = rates
    eig = np.linalg.eigvals(K5).real
    assert eig.min() > 1e4


# (rate, tolerance): the measured difference (module docstring) with ~1 % margin
TOLERANCES = {"vertical_per_side": 0.035, "windup": 0.03, "lateral": 0.05, "roll": 0.035,
              "fore_aft": 0.06, "yaw": 0.15, "roll_steer": 0.035}


@pytest.mark.validation
@pytest.mark.parametrize("rate", sorted(TOLERANCES))
def test_rates_against_the_beam_model(rates, rate):
    K5, Kb = rates
    five, beam = _rates(K5)[rate], _rates(Kb)[rate]
    assert abs(five - beam) <= TOLERANCES[rate] * abs(beam), (rate, five, beam)


@pytest.mark.validation
def test_beam_rates_follow_the_leaf_rate(leaf):
    """The oracle is not tuned to agree: doubling the leaf's vertical rate
    c_V in the five-link joints (YAML) raises the beam's vertical rate per
    side by the leaf's share (eye, shackle and geometry in series stay)."""
    cfg, _ = leaf
    Kb, _ = leaf_beam.axle_stiffness(cfg)
    stiff = dict(cfg, bushing_types={k: dict(v) for k, v in cfg["bushing_types"].items()})
    for t in ("leaf_joint_inner", "leaf_joint_outer"):
        k = list(stiff["bushing_types"][t]["stiffness"])
        k[5] *= 2.0
        stiff["bushing_types"][t]["stiffness"] = k
    Kb2, _ = leaf_beam.axle_stiffness(stiff)
    ratio = _rates(Kb2)["vertical_per_side"] / _rates(Kb)["vertical_per_side"]
    assert 1.6 < ratio < 2.0


KC_TOLERANCES = {"wheel_rate": 0.05, "wind_up": 0.05, "axle_lateral_compliance": 0.07, "axle_roll_steer": 0.05}


@pytest.mark.validation
def test_kc_metrics_of_the_leaf_axle_against_the_beam_model(leaf, rates):
    """The K&C rig on the leaf axle (design position, brakes locked, contact
    patches 0.347 m below the wheel centres) against the beam model's axle
    compliance loaded the same way: the wheel rate (vertical at the wheel
    centres, which lie on the axle's vertical line), the wind-up (braking
    torque on both wheels), the axle's lateral compliance (lateral force on
    both contact patches) and its roll steer coefficient. Measured: wheel
    rate 118.8 vs 121.8 N/mm (-2.5 %), wind-up 2.230 vs 2.193 deg/(kN m)
    (+1.7 %), axle lateral compliance 3.888 vs 3.682 mm/kN (+5.6 %: the
    lateral and roll compliances add), roll steer coefficient -5.42 vs
    -5.29 % (+2.4 %; the rear axle steers out of the turn: roll oversteer,
    as the axle moves rearward in bump, wheel recession 56 mm/m)."""
    cfg, model = leaf
    _, Kb = rates
    R = 0.347
    mk = kc.lock_brakes(model, kc.DEFAULT_BRAKE_LOCK)
    eq = kc.design_position(mk)
    M = jax.device_get(jax.jit(lambda m, e: kc.kc_metrics(m, e, loaded_radius=R))(mk, eq))
    C = np.linalg.inv(Kb)
    zc = float(cfg["shared"]["bodies"]["axle"]["com"][2])
    beam = {"wheel_rate": 1 / C[2, 2] / 2 / 1000,                                     # N/mm per side
            "wind_up": C[4, 4] * 2000 * 180 / np.pi}                                 # deg per kN m per wheel
    lat = C @ np.array([0.0, 2000.0, 0.0, 2000.0 * (R + zc), 0.0, 0.0])    # 2 kN to the left at the contact patches
    beam_axle = {"axle_lateral_compliance": (lat[1] + lat[3] * zc) * 1000,           # mm/kN at the wheel centres
                 "axle_roll_steer": -C[5, 3] / C[3, 3] * 100}                        # % (roll to the right = -x)
    for name, value in beam.items():
        assert np.allclose(M[name], value, rtol=KC_TOLERANCES[name]), (name, M[name], value)
    for name, value in beam_axle.items():
        assert abs(float(M[name]) - value) <= KC_TOLERANCES[name] * abs(value), (name, M[name], value)


# ----------------------------------------------------------------------------- the longitudinal step against Radau

# NMSE (mean((y - y_ref)^2) / mean(y_ref)^2 over 4.9-6.0 s, both sides
# pooled) of LSRT2 h = 1 ms against Radau (rtol 1e-6, atol 1e-9 m, 1e-6 m/s)
# on the longitudinal step at the design wheel load, measured 2026-11-27;
# the test holds it within [measured / 10, 3 x measured]. Re-measure (the
# test prints it) after a change of the model or the method.
MEASURED_NMSE = {"wheel_displacement": 8.6e-9, "bushing_force": 1.3e-8}


@pytest.fixture(scope="module")
def step_runs(leaf):
    from kernels import loads
    from kernels.statics import equilibrium
    from tests.conftest import step_runs_against_radau
    cfg, model = leaf
    u0 = np.zeros((2, 6))
    u0[:, 2] = cfg["alignment"]["wheel_load"]
    amp = np.zeros((2, 6))
    amp[:, 0] = -2500.0
    exc = loads.excitation(u0, [(5.0, 0.0, amp)])
    eq = equilibrium(model, loads.u_at(exc, 4.9))
    return step_runs_against_radau("leaf_spring_step_nmse", model, exc, eq.r, rtol=1e-6,
                                   atol_coordinates=1e-9, atol_speeds=1e-6)


@pytest.mark.validation
@pytest.mark.parametrize("what", ["wheel_displacement", "bushing_force"])
def test_step_nmse_against_radau(step_runs, leaf, what):
    from kernels import metrics
    from sweep.cube import pooled_signals
    _, model = leaf
    t, lsrt2, ref = step_runs
    window = np.tile((t >= 4.9) & (t <= 6.0), 2)
    y = pooled_signals(lsrt2, model, what)[window]
    y_ref = pooled_signals(ref, model, what)[window]
    value = float(metrics.nmse(y, y_ref))
    print(f"NMSE {what}: {value:.3e}")
    measured = MEASURED_NMSE[what]
    assert value <= 3.0 * measured and value > measured / 10.0, (what, value, measured)
