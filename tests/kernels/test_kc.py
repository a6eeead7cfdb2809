"""Quasi-static K&C (kernels/kc.py, kernels/statics.py): implicit derivatives
of the equilibrium, metrics against hand calculations and against
finite-difference loading of the full nonlinear model, reciprocity, and the
K&C load cases run as sweeps."""
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import kernels  # noqa: F401  (float64)
from kernels import kc, statics
from kernels.model import build_model

G = 9.81
DEG = 180.0 / np.pi


def _wheel(index, name, y, mass=20.0, inertia=(0.6, 0.9, 0.6)):
    return {"index": index, "name": name, "mass": mass, "inertia": np.diag(inertia).tolist(),
            "position": [0.0, y, 0.0]}


def _rot(axis, angle):
    c, s = np.cos(angle), np.sin(angle)
    i, j = [(1, 2), (2, 0), (0, 1)][axis]
    Q = np.eye(3)
    Q[i, i] = Q[j, j] = c
    Q[i, j], Q[j, i] = -s, s
    return Q


TOY_FRAME = _rot(2, np.radians(30.0)) @ _rot(0, np.radians(35.0))   # bushing axes, left side
MIRROR = np.diag([1.0, -1.0, 1.0])


def toy_bushing_axle(d=(0.03, -0.12, 0.08), k=(2e5, 1e5, 4e4, 4e3, 1.5e3, 8e2), frame=TOY_FRAME):
    """Linear toy axle: each wheel (centre at y = +-0.75 m) hangs from the
    chassis on one bushing with stiffness ``k`` along the axes ``frame``
    (columns, vehicle frame), placed at the wheel centre + ``d`` (the right
    wheel is the mirror image)."""
    bodies = [_wheel(1, "wheel_left", 0.75), _wheel(2, "wheel_right", -0.75)]
    markers, bushings = [], []
    for s, (body, y) in enumerate(((1, 0.75), (2, -0.75))):
        sign = 1.0 if s == 0 else -1.0
        p = [d[0], y + sign * d[1], d[2]]
        Q = frame if s == 0 else MIRROR @ frame @ MIRROR
        markers += [{"index": 10 + 2 * s, "name": f"m_chassis_{s}", "body": 0, "position": p,
                     "orientation": Q.tolist()},
                    {"index": 11 + 2 * s, "name": f"m_wheel_{s}", "body": body, "position": p,
                     "orientation": Q.tolist()}]
        bushings.append({"index": s + 1, "name": f"mount_{s}", "marker_1": 11 + 2 * s,
                         "marker_2": 10 + 2 * s, "stiffness": list(k), "damping": [0.0] * 6})
    return {"name": "toy_bushing", "gravity": [0, 0, -G], "bodies": bodies, "markers": markers,
            "bushings": bushings, "p2p": [], "wheels": {"left": 1, "right": 2}}


# wheel point, chassis point (left side), stiffness N/m, preload N
SPRING_LINKS = [
    ((0.05, 0.70, 0.15), (0.25, 0.40, 0.20), 5e5, 0.0),
    ((-0.05, 0.70, 0.15), (-0.25, 0.40, 0.22), 5e5, 0.0),
    ((0.06, 0.72, -0.12), (0.30, 0.35, -0.10), 5e5, 0.0),
    ((-0.06, 0.72, -0.12), (-0.28, 0.35, -0.08), 5e5, 0.0),
    ((-0.15, 0.70, -0.02), (-0.15, 0.38, 0.00), 3e5, 0.0),
    ((0.00, 0.65, -0.05), (0.02, 0.55, 0.45), 3e4, 900.0),
]


def toy_spring_axle():
    """A conservative toy: each wheel held by six point-to-point springs
    (exactly derivable from a potential at any deflection) with a preloaded
    vertical spring, plus a preloaded spring between the wheels (cross
    coupling); gravity on."""
    bodies = [_wheel(1, "wheel_left", 0.75, mass=25.0), _wheel(2, "wheel_right", -0.75, mass=25.0)]
    markers, p2p = [], []
    idx = 10
    for s, body in enumerate((1, 2)):
        sign = 1.0 if s == 0 else -1.0
        for j, (pw, pc, k, f0) in enumerate(SPRING_LINKS):
            a = [pw[0], sign * pw[1], pw[2]]
            b = [pc[0], sign * pc[1], pc[2]]
            markers += [{"index": idx, "name": f"w{s}{j}", "body": body, "position": a},
                        {"index": idx + 1, "name": f"c{s}{j}", "body": 0, "position": b}]
            p2p.append({"index": len(p2p) + 1, "name": f"link_{s}_{j}", "marker_1": idx,
                        "marker_2": idx + 1, "kind": "spring", "stiffness": k, "preload": f0})
            idx += 2
    markers += [{"index": idx, "name": "x_l", "body": 1, "position": [0.0, 0.65, -0.1]},
                {"index": idx + 1, "name": "x_r", "body": 2, "position": [0.0, -0.65, -0.1]}]
    p2p.append({"index": len(p2p) + 1, "name": "cross", "marker_1": idx, "marker_2": idx + 1,
                "kind": "spring", "stiffness": 1e4, "preload": 200.0})
    return {"name": "toy_springs", "gravity": [0, 0, -G], "bodies": bodies, "markers": markers,
            "bushings": [], "p2p": p2p, "wheels": {"left": 1, "right": 2}}


@jax.jit
def _design_and_metrics(model):
    eq = kc.design_position(model)
    return eq, kc.kc_metrics(model, eq, loaded_radius=0.3)


def _skew(d):
    return np.array([[0, -d[2], d[1]], [d[2], 0, -d[0]], [-d[1], d[0], 0]])


# --------------------------------------------------------------------------- hand calculation

def test_linear_toy_axle_matches_hand_computed_compliance():
    """One bushing of stiffness K (diagonal in its axes Q) at offset p from the
    wheel centre w: a load (F, M) at w is (F, M + (w - p) x F) at p, the
    bushing's vehicle-frame compliance is Q6 K^-1 Q6^T (Q6 = diag(Q, Q)), and
    the wheel-centre motion is (dx_p + dphi x (w - p), dphi), so
    C = T^T Q6 K^-1 Q6^T T with T = [[I, 0], [[w-p]x, I]]."""
    d = np.array([0.03, -0.12, 0.08])
    k = np.array([2e5, 1e5, 4e4, 4e3, 1.5e3, 8e2])
    model = build_model(toy_bushing_axle(tuple(d), tuple(k)))
    assert len(kc.brake_lock_index(model)[0]) == 0      # no wheel bearing: nothing to lock
    eq, M = _design_and_metrics(model)
    assert bool(eq.converged)
    np.testing.assert_allclose(eq.fz, [20.0 * G] * 2, rtol=1e-12)   # carries the wheel weight
    T = np.eye(6)
    T[3:, :3] = _skew(-d)                                 # w - p = -d
    Q6 = np.kron(np.eye(2), TOY_FRAME)
    C_hand = T.T @ Q6 @ np.diag(1.0 / k) @ Q6.T @ T
    C = np.asarray(M["compliance_matrix"])
    np.testing.assert_allclose(C[0], C_hand, rtol=1e-9, atol=1e-12 * np.abs(C_hand).max())
    assert abs(C_hand[5, 2]) > 0.05 * np.sqrt(C_hand[5, 5] * C_hand[2, 2])   # bump couples to steer
    # the right wheel is the mirror image: C_R = S C_L S with S = diag(1,-1,1,-1,1,-1)
    S = np.diag([1, -1, 1, -1, 1, -1.0])
    np.testing.assert_allclose(C[1], S @ C_hand @ S, rtol=1e-9, atol=1e-12 * np.abs(C_hand).max())
    # metrics from the hand matrix (left wheel, design orientation = identity:
    # toe = -phi_z, camber = -phi_x; loaded radius 0.3 m)
    R = 0.3
    Ch = C_hand
    hand = {
        "wheel_rate": 1 / Ch[2, 2] / 1000,
        "bump_steer": -Ch[5, 2] / Ch[2, 2] * DEG,
        "camber_gain": -Ch[3, 2] / Ch[2, 2] * DEG,
        "toe_per_aligning_torque": -Ch[5, 5] * 100 * DEG,
        "longitudinal_compliance": Ch[0, 0] * 1e6,
        "toe_per_traction_force": -Ch[5, 0] * 1000 * DEG,
    }
    lat = np.array([0, -1, 0, -R, 0, 0]) * 1000.0        # inboard (-y) at the contact patch
    brk = np.array([-1, 0, 0, 0, R, 0]) * 1000.0         # rearward at the contact patch
    hand["lateral_compliance"] = -(Ch @ lat)[1] * 1000
    hand["camber_per_lateral_force"] = -(Ch @ lat)[3] * DEG
    hand["toe_per_braking_force"] = -(Ch @ brk)[5] * DEG
    hand["longitudinal_compliance_braking"] = -(Ch @ brk)[0] * 1000
    hand["roll_wheel_rate"] = hand["wheel_rate"]          # sides uncoupled
    hand["wind_up"] = Ch[4, 4] * 1000 * DEG               # My on both wheels; sides uncoupled
    for name, value in hand.items():
        np.testing.assert_allclose(M[name], [value, value], rtol=1e-8, err_msg=name)
    # the axle as a whole: both contact patches pushed to the left (the right
    # wheel's mirrored compliance gives the same lateral motion), and the mean
    # steer angle per body roll angle: each wheel's toe per own travel is the
    # bump steer (sides uncoupled), the steer angles (ISO) of the rebounding
    # left and the bumping right wheel are both + bump steer, the roll angle 2 / track
    y = np.asarray(eq.r)[np.asarray(model.topology.wheel_slots), 1]
    axle = {"axle_lateral_compliance": (Ch @ np.array([0, 1, 0, R, 0, 0]))[1] * 1e6,
            "axle_roll_steer": -Ch[5, 2] / Ch[2, 2] * (y[0] - y[1]) / 2 * 100}
    for name, value in axle.items():
        np.testing.assert_allclose(M[name], value, rtol=1e-8, err_msg=name)


# --------------------------------------------------------------------------- reciprocity

def test_compliance_is_symmetric_for_conservative_elements():
    """Maxwell-Betti: with elements derived from a potential (P2P springs,
    preloaded, finite deflection under gravity and the design wheel load),
    d(wheel-centre motion)/d(wheel load) is symmetric - for each wheel and
    across the axle (12 x 12, coupled by the cross spring)."""
    model = build_model(toy_spring_axle())
    eq, M = _design_and_metrics(model)
    assert bool(eq.converged)
    # the springs are loaded (finite preload/deflection), so geometric stiffness acts
    assert np.all(np.asarray(eq.fz) > 100)
    Gm = np.asarray(M["compliance_full"])
    assert np.abs(Gm[:6, 6:]).max() > 1e-4 * np.abs(Gm).max()     # sides are coupled
    D = np.sqrt(np.abs(np.diag(Gm)))
    Gs = Gm / np.outer(D, D)                       # unit-free, each entry relative to its diagonal
    assert np.abs(Gs - Gs.T).max() < 1e-8
    for s in range(2):
        C = np.asarray(M["compliance_matrix"][s])
        assert np.abs(C - C.T).max() < 1e-8 * np.abs(C).max()
    # and the bushing toy (undeflected linear bushing) is symmetric too
    _, Mb = _design_and_metrics(build_model(toy_bushing_axle()))
    C = np.asarray(Mb["compliance_matrix"][0])
    assert np.abs(C - C.T).max() < 1e-8 * np.abs(C).max()


def test_compliance_matrix_matches_finite_difference_loading():
    """The 12 x 12 compliance (implicit differentiation) against central
    differences of the nonlinear equilibrium loaded at the wheel centres,
    conservative toy, measured in the same outputs (wheel-centre position and
    the rotation vector of the wheel's change of attitude)."""
    from kernels.rotations import euler_to_matrix
    model = build_model(toy_spring_axle())
    eq, M = _design_and_metrics(model)
    u0 = kc.design_loads(eq)
    eqf = jax.jit(lambda u: statics.static_equilibrium(model, u, r_start=eq.r).r)
    slots = np.asarray(model.topology.wheel_slots)
    R0 = np.asarray(euler_to_matrix(eq.r[slots, 3:]))

    def outputs(r):
        r = np.asarray(r)
        out = []
        for s, w in enumerate(slots):
            Rw = np.asarray(euler_to_matrix(jnp.asarray(r[w, 3:])))
            from scipy.spatial.transform import Rotation
            phi = Rotation.from_matrix(Rw @ R0[s].T).as_rotvec()
            out.append(np.concatenate([r[w, :3], phi]))
        return np.concatenate(out)

    h = np.array([1.0, 1.0, 1.0, 0.1, 0.1, 0.1])          # N, N m
    fd = np.zeros((12, 12))
    for j in range(12):
        du = np.zeros(12)
        du[j] = h[j % 6]
        up = outputs(eqf(u0 + du.reshape(2, 6)))
        dn = outputs(eqf(u0 - du.reshape(2, 6)))
        fd[:, j] = (up - dn) / (2 * h[j % 6])
    Gm = np.asarray(M["compliance_full"])
    np.testing.assert_allclose(Gm, fd, rtol=1e-5, atol=1e-6 * np.abs(Gm).max())


# --------------------------------------------------------------------------- implicit derivatives


# --------------------------------------------------------------------------- the double wishbone


def test_brake_lock_finds_the_wheel_bearings(dw_model):
    rows, cols = kc.brake_lock_index(dw_model)
    names = [dw_model.topology.bushing_names[i] for i in rows]
    assert sorted(names) == ["wheel_bearing_inner_left", "wheel_bearing_inner_right",
                             "wheel_bearing_outer_left", "wheel_bearing_outer_right"]
    assert list(cols) == [5, 5, 5, 5]       # rz: the bearing axis is the spin axis


# --------------------------------------------------------------------------- K&C load cases as sweeps
# (on the small toy axle configs/model/toy_trailing_arm.yaml: the engine path is
# model-agnostic, and its compilation is short)

def _kc_cfg(*over):
    from tests.jobs import cfg_of
    return cfg_of("model=toy_trailing_arm", *over)


@pytest.fixture(scope="module")
def toy_direct():
    """Metrics of the nominal toy axle computed directly with the kernels."""
    from sweep.axle.builder import model_from_config
    model = kc.lock_brakes(model_from_config(_kc_cfg().model), kc.DEFAULT_BRAKE_LOCK)
    eq = jax.jit(kc.design_position)(model)
    return jax.device_get(jax.jit(kc.kc_metrics)(model, eq, kc.DEFAULT_LOADED_RADIUS))


def test_force_load_case_layout_without_compute(tmp_path):
    """A force load case's amplitudes, step dimension and units (validated and
    laid out before any compute; its curves are the kernels' force_curve,
    checked against the metrics on the double wishbone above)."""
    from sweep.engine.layout import store_spec
    from sweep.kinds.kinematics_compliance import KIND
    plan = KIND.plan(_kc_cfg("loadcase=kc_aligning_torque", "loadcase.load=[-100.0,100.0]",
                             "loadcase.steps=5", f"output.path={tmp_path}/a.zarr"))
    spec = store_spec(plan)
    np.testing.assert_allclose(spec["__coords__"]["torque"][0], [-100, -50, 0, 50, 100])
    assert spec["__coords__"]["torque"][1]["units"] == "N m"
    assert spec["toe"][0] == ("variant", "torque", "side")
    plan = KIND.plan(_kc_cfg("loadcase=kc_braking_force", f"output.path={tmp_path}/b.zarr"))
    assert store_spec(plan)["__coords__"]["force"][1]["units"] == "N"
    assert len(plan.case["amplitudes"]) == 9
    assert not os.path.exists(tmp_path / "a.zarr")


def test_toy_sides_are_decoupled_so_roll_equals_parallel_travel(toy_direct):
    """The trailing-arm toy axle has no part joining its sides (no anti-roll
    bar, arms on the body): each wheel's toe, camber and vertical force
    depend on its own travel only, so per the side's own travel the
    opposite (roll) metrics equal the parallel ones - the sign convention
    of the roll metrics checked against the axle's structure."""
    M = toy_direct
    for par, roll in (("bump_steer", "roll_steer"), ("camber_gain", "roll_camber_gain"),
                      ("wheel_rate", "roll_wheel_rate")):
        np.testing.assert_allclose(M[roll], M[par], rtol=1e-6, atol=1e-9, err_msg=roll)
    assert np.all(np.abs(M["camber_gain"]) > 1e-2) and np.all(M["wheel_rate"] > 1.0)
