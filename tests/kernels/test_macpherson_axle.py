"""The MacPherson strut front axle signed off as the other axles are
(tests/kernels/test_axle_kinematics.py): design state at ride height with
the stops clear and the static alignment of the model file, the K&C figures
inside published ranges (each range with its source, docs/kc_and_tuning.md),
and the elastokinematic K&C travel curve with stiffened joints against an
independent rigid-joint loop closure of the hardpoints (scipy root finding:
lower-arm ball joint on its circle, strut axis through the top mount, tie
rod length, wheel-centre height).

One compiled program serves the nominal and the stiffened axle (the model's
values are run-time inputs)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.optimize
from scipy.spatial.transform import Rotation

import kernels  # noqa: F401  (float64)
from kernels import kc, metrics, statics
from kernels.model import build_model
from sweep.axle.builder import build_tables
from tests.conftest import load_model_cfg
from tests.kernels.test_axle_kinematics import _stop_clearances

pytestmark = pytest.mark.slow

DEG = 180.0 / np.pi
TRAVEL = np.linspace(-0.04, 0.04, 9)     # m; the stops engage after ~52 mm of wheel travel


@jax.jit
def _solve(locked):
    eq = kc.design_position(locked, tol=1e-4)
    u = jnp.zeros((2, 6)).at[:, 2].set(5000.0)          # the design wheel load (the load cases')
    st = statics.static_equilibrium(locked, u, tol=1e-4)
    met = kc.kc_metrics(locked, eq)
    curve = kc.travel_curve(locked, eq, TRAVEL, tol=1e-4)   # the steps' order is structure
    return eq, st, met, curve


def _sign_off(model):
    """Design position, static state under 5 kN, K&C metrics and the travel
    curve, brakes locked (1e8 N m/rad; no spin torque acts in the static
    state or the travel)."""
    return _solve(kc.lock_brakes(model, 1e8))


@pytest.fixture(scope="module")
def axle():
    cfg = load_model_cfg("macpherson")
    model = build_model(build_tables(cfg))
    return cfg, model, jax.tree_util.tree_map(np.asarray, _sign_off(model))


def test_design_state_is_at_ride_height_with_stops_clear_and_the_alignment_of_the_file(axle):
    cfg, model, (eq, st, met, _) = axle
    al = cfg["alignment"]
    assert bool(eq.converged) and bool(st.converged)
    np.testing.assert_allclose(eq.fz, al["wheel_load"], rtol=0.002)
    wc = np.asarray(metrics.wheel_centre_position(model, st.r))
    z0 = np.asarray(kc.design_heights(model))
    assert np.all(np.abs(wc[:, 2] - z0) < 0.002), (wc[:, 2] - z0)
    clear = _stop_clearances(model, st.r)
    assert len(clear) == 4
    for k, v in clear.items():
        assert v >= 0.040, (k, v)
    np.testing.assert_allclose(met["design_toe"], al["toe_deg"], atol=0.02)
    np.testing.assert_allclose(met["design_camber"], al["camber_deg"], atol=0.02)


# K&C figures at the design position and their published ranges: (low, high,
# source key of docs/kc_and_tuning.md's MacPherson table, where the sources
# are named). Signs as the metrics (kernels.kc.METRICS): toe-in, camber
# top-out, bump > 0. Figures without a readable published range (camber
# gain, the lateral compliances) and the one outside its range (bump steer)
# are listed there with the reason.
RANGES = {
    "wheel_rate": (20.0, 45.0, "S9"),                  # N/mm: ride frequency 1.0-1.5 Hz
    "toe_per_braking_force": (-0.15, -0.03, "S4"),     # deg/kN, toe-out: understeer on a front axle
    "toe_per_aligning_torque": (-0.15, -0.05, "S5"),   # deg/(100 N m)
    "design_roll_centre_height": (0.0, 100.0, "S11"),  # mm, front axles
}


@pytest.mark.parametrize("name", sorted(RANGES))
def test_kc_figures_inside_published_ranges(axle, name):
    low, high, _ = RANGES[name]
    v = np.atleast_1d(np.asarray(axle[2][2][name]))
    assert np.all((v >= low) & (v <= high)), (name, v, (low, high))
    np.testing.assert_allclose(v, v[0], rtol=1e-6, atol=1e-9)       # both sides alike


def test_steering_axis_is_the_line_through_the_ball_joint_and_the_top_mount(axle):
    """Kingpin inclination, caster, scrub radius and caster trail at the
    design position equal the line LU -> T of the hardpoints (numpy), to the
    small rotation of the carrier between the hardpoint geometry and the
    design position (0.2 deg, 2 mm)."""
    cfg, _, (_, _, met, _) = axle
    hp = {k: np.asarray(v, float) for k, v in cfg["hardpoints"].items()}
    k = (hp["T"] - hp["LU"]) / np.linalg.norm(hp["T"] - hp["LU"])
    R = kc.DEFAULT_LOADED_RADIUS
    g = hp["LU"] + (-R - hp["LU"][2]) / k[2] * k              # the axis at the ground
    # contact point under the wheel centre, moved by the design camber (top out > 0: the contact point inboard)
    contact_y = hp["WC"][1] - R * np.sin(np.radians(cfg["alignment"]["camber_deg"]))
    expected = {"design_kingpin_inclination": np.degrees(np.arctan2(-k[1], k[2])),
                "design_caster": np.degrees(np.arctan2(-k[0], k[2])),
                "design_scrub_radius": (contact_y - g[1]) * 1000, "design_caster_trail": g[0] * 1000}
    for name, want in expected.items():
        tol = 0.2 if name.endswith(("inclination", "caster")) else 2.0
        np.testing.assert_allclose(np.asarray(met[name]), want, atol=tol, err_msg=name)


def rigid_macpherson(cfg, travel):
    """Left carrier poses with ideal joints by loop closure of the hardpoints
    (with the alignment adjustments), for wheel-centre heights design +
    travel: WC (n, 3), toe, camber (n,) [deg] (DIN 70000, left side)."""
    hp = {k: np.asarray(v, float) for k, v in cfg["hardpoints"].items()}
    bu = cfg["per_side"]["bushings"]
    T = hp["T"] + bu["top_mount"]["adjust"]["distance"] * np.array([0.0, 1.0, 0.0])
    WC, S, LU, Q, P = hp["WC"], hp["S"], hp["LU"], hp["Q"], hp["P"]
    u0 = (hp["T"] - S) / np.linalg.norm(hp["T"] - S)      # strut axis, fixed in the carrier
    L = {"LF": np.linalg.norm(LU - hp["LF"]), "LB": np.linalg.norm(LU - hp["LB"]),
         "P": np.linalg.norm(Q - P) + bu["tie_rod_outer"]["adjust"]["distance"]}

    def pose(x):
        R = Rotation.from_rotvec(x[3:]).as_matrix()
        return (lambda p: WC + x[:3] + R @ (p - WC)), R

    def residual(x, z):
        f, R = pose(x)
        u = R @ u0
        d = T - f(S)
        off = d - (d @ u) * u                             # top mount's distance from the strut axis
        e1 = np.cross(u, [1.0, 0.0, 0.0])
        e1 /= np.linalg.norm(e1)
        return [np.linalg.norm(f(LU) - hp["LF"]) - L["LF"], np.linalg.norm(f(LU) - hp["LB"]) - L["LB"],
                off @ e1, off @ np.cross(u, e1), np.linalg.norm(f(Q) - P) - L["P"], f(WC)[2] - z]

    out = {}
    for branch in (travel[travel <= 0][::-1], travel[travel > 0]):
        x = np.zeros(6)
        for s in branch:
            sol = scipy.optimize.least_squares(residual, x, args=(WC[2] + s,), xtol=1e-15, ftol=1e-15, gtol=1e-15)
            assert np.max(np.abs(sol.fun)) < 1e-11, sol.message
            x = sol.x
            f, R = pose(x)
            a = R[:, 1]                                   # spin axis (wheel frame y = vehicle y at design)
            out[s] = (f(WC), np.arctan2(a[0], a[1]) * DEG, -np.arcsin(a[2]) * DEG)
    wc, toe, camber = zip(*(out[s] for s in travel))
    return np.array(wc), np.array(toe), np.array(camber)


def test_kc_travel_with_stiff_joints_equals_rigid_joint_kinematics(axle):
    """Every bushing 1000x stiffer in translation (the strut guides, the top
    mount and the ball joints become ideal): the K&C wheel-travel curve
    (toe, camber, wheel-centre x / y) equals the loop closure to 1e-3 deg /
    0.01 mm; and the linkage really moves the wheel."""
    cfg, model, _ = axle
    stiff = model.replace_elements(bushing={"k": model.elements["bushing"]["k"].at[:, :3].multiply(1000.0)})
    eq0, _, _, c = jax.tree_util.tree_map(np.asarray, _sign_off(stiff))
    assert bool(eq0.converged) and bool(np.all(c["converged"]))
    wc0 = np.asarray(metrics.wheel_centre_position(stiff, eq0.r))[0]
    wc = wc0 + c["wheel_centre_displacement"][:, 0]
    rwc, rtoe, rcamber = rigid_macpherson(cfg, TRAVEL)
    np.testing.assert_allclose(wc[:, 2], rwc[:, 2], atol=2e-6)
    np.testing.assert_allclose(wc[:, :2] * 1000, rwc[:, :2] * 1000, atol=0.01)
    np.testing.assert_allclose(c["toe"][:, 0] * DEG, rtoe, atol=1e-3)
    np.testing.assert_allclose(c["camber"][:, 0] * DEG, rcamber, atol=1e-3)
    assert np.ptp(rcamber) > 0.5 and np.ptp(rwc[:, 0]) > 0.01
