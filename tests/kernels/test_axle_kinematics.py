"""The axles as a chassis engineer checks them: kinematic
determinacy from the tables, design state (ride height, stop clearance,
static alignment), no bind in the reference bushing, and the elastokinematic
K&C travel curves with stiffened joints against an independent rigid-joint
loop-closure solve of the same hardpoints (scipy root finding).

Oracles are independent of the kernels: the mobility is the rank of a
constraint Jacobian assembled here from the plain tables (joints as ideal
constraints), the kinematics a loop closure written here from the YAML's
hardpoints.
"""
import copy

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
import scipy.optimize
from scipy.spatial.transform import Rotation

import kernels  # noqa: F401  (float64)
from tests.conftest import load_model_cfg
from kernels import kc, metrics, statics
from kernels.model import build_model
from sweep.axle.builder import build_tables

pytestmark = pytest.mark.slow

DEG = 180.0 / np.pi


def _unit(v):
    v = np.asarray(v, float)
    return v / np.linalg.norm(v)


K_TRANS = 1e5   # N/m: a bushing direction at least this stiff is a joint constraint
K_ROT = 1e4     # N m/rad


# --------------------------------------------------------------------------- mobility

def _skew(r):
    return np.array([[0, -r[2], r[1]], [r[2], 0, -r[0]], [-r[1], r[0], 0]])


def constraint_jacobian(tables, release=None):
    """Rows = ideal constraints of the joints, columns = 6 velocity DOF per
    body (translation, small rotation; vehicle frame).

    A joint is the set of bushings between the same two bodies (e.g. the two
    rows of a hub bearing, the two discs of a top mount, the two mounts of
    an anti-roll-bar half, the two guides of a sliding joint). Its lumped
    6x6 stiffness about the markers' centroid c (each bushing's diagonal
    rates in its own frame, moved to c by its lever arm) is split into
    principal directions; a direction whose rate is at least K_TRANS (N/m)
    - rotations measured as translations at a lever of sqrt(K_ROT/K_TRANS)
    m, so that K_ROT N m/rad is the rotational threshold - is a constraint.
    ``release = {bushing name: direction}`` frees the relative translation
    along ``direction`` at that bushing's joint (a rack)."""
    release = release or {}
    bodies = tables["bodies"]
    slot = {b["index"]: i for i, b in enumerate(bodies)}
    com = {b["index"]: np.asarray(b["position"], float) for b in bodies}
    markers = {mk["index"]: mk for mk in tables["markers"]}
    n = 6 * len(bodies)
    ell = np.sqrt(K_ROT / K_TRANS)
    joints = {}
    for e in tables["bushings"]:
        m1, m2 = markers[e["marker_1"]], markers[e["marker_2"]]
        key = (m1["body"], m2["body"])
        if key[::-1] in joints:
            key = key[::-1]
        joints.setdefault(key, []).append(e)
    rows = []
    for (b1, b2), elements in joints.items():
        pts = [np.asarray(markers[e["marker_1"]]["position"], float) for e in elements]
        c = np.mean(pts, axis=0)
        K = np.zeros((6, 6))
        for e, p in zip(elements, pts):
            A = np.asarray(markers[e["marker_1"]]["orientation"], float)
            # marker deflection (frame A) per relative motion (delta, theta') at c
            B = np.zeros((6, 6))
            B[:3, :3] = A.T
            B[:3, 3:] = -A.T @ _skew(p - c) / ell
            B[3:, 3:] = A.T / ell
            k = np.asarray(e["stiffness"], float).copy()
            K += B.T @ np.diag(k) @ B
        for e in elements:
            if e["name"] in release:
                d = np.zeros(6)
                d[:3] = _unit(release[e["name"]])
                P = np.eye(6) - np.outer(d, d)
                K = P @ K @ P
        w, V = np.linalg.eigh(K)
        for j in np.nonzero(w >= K_TRANS)[0]:
            vt, vr = V[:3, j], V[3:, j]
            row = np.zeros(n)
            for b, sign in ((markers[elements[0]["marker_1"]]["body"], -1.0),
                            (markers[elements[0]["marker_2"]]["body"], 1.0)):
                if b == 0:
                    continue
                s = slot[b]
                row[6 * s:6 * s + 3] += sign * vt
                row[6 * s + 3:6 * s + 6] += sign * (np.cross(c - com[b], vt) + ell * vr)
            rows.append(row)
    return np.array(rows), slot


def carrier_freedoms(tables, carrier, release=None):
    """Rigid-body freedoms of one body: the rank of the null space of the
    constraint Jacobian restricted to that body's 6 coordinates."""
    C, slot = constraint_jacobian(tables, release)
    N = scipy.linalg.null_space(C, rcond=1e-10)
    s = next(slot[b["index"]] for b in tables["bodies"] if b["name"] == carrier)
    block = N[6 * s:6 * s + 6]
    sv = np.linalg.svd(block, compute_uv=False)
    return int(np.sum(sv > 1e-8 * max(1.0, sv.max(initial=0.0))))


RACKS = {"double_wishbone": ("tie_rod_inner", [0, 1, 0]),
         "multilink": ("tie_rod_subframe", [0, 1, 0])}


@pytest.mark.parametrize("name", ["double_wishbone", "multilink"])
def test_each_carrier_has_one_freedom_with_the_rack_held_and_two_with_it_free(name):
    tables = build_tables(load_model_cfg(name))
    joint, direction = RACKS[name]
    for side in ("left", "right"):
        carrier = f"wheel_carrier_{side}"
        assert carrier_freedoms(tables, carrier) == 1, (name, side)
        assert carrier_freedoms(tables, carrier, {f"{joint}_{side}": direction}) == 2, (name, side)
        # the wheel spins on the carrier: two freedoms (travel + spin) for the wheel
        assert carrier_freedoms(tables, f"wheel_{side}") == 2, (name, side)


def test_mobility_check_finds_the_old_over_constrained_double_wishbone():
    """The layout before the re-laid-out axle of 2026-11-24 (A-arm + an added longitudinal link on the
    carrier: 6 constraints) has no rigid-body freedom; so does the new one
    with that extra link added back."""
    cfg = load_model_cfg("double_wishbone")
    ps = cfg["per_side"]
    cfg["hardpoints"]["L1"] = [0.33, 0.42, -0.10]
    cfg["hardpoints"]["L2"] = [0.04, 0.70, -0.11]
    ps["bodies"]["extra_link"] = {"mass": 1.3, "rods": [["L1", "L2"]], "radius": 0.012}
    ps["bushings"]["extra_link_body"] = {"bodies": ["extra_link", "chassis"], "at": "L1",
                                         "axis": [0, 0, 1], "type": "longitudinal_link_bushing"}
    ps["bushings"]["extra_link_carrier"] = {"bodies": ["extra_link", "wheel_carrier"], "at": "L2",
                                            "type": "ball_joint"}
    tables = build_tables(cfg)
    assert carrier_freedoms(tables, "wheel_carrier_left") == 0


# --------------------------------------------------------------------------- design state

@pytest.fixture(scope="module", params=["double_wishbone", "multilink"])
def axle(request):
    cfg = load_model_cfg(request.param)
    model = build_model(build_tables(cfg))
    eq = jax.jit(kc.design_position)(model)
    u = jnp.zeros((2, 6)).at[:, 2].set(5000.0)            # the longitudinal step's wheel loads
    st = jax.jit(statics.static_equilibrium)(model, u)
    return request.param, cfg, model, eq, st


def _stop_clearances(model, r):
    """Remaining travel [m] before each bump / rebound stop engages, by its own
    law (model tables: a stop engages when the compression s = L_ref - L
    exceeds the clearance, rebound when -s does)."""
    topo = model.topology
    tabs = topo.tables
    markers = {mk["index"]: mk for mk in tabs["markers"]}
    slot = {b["index"]: i for i, b in enumerate(tabs["bodies"])}
    pos, eul = np.asarray(r[:, :3]), np.asarray(r[:, 3:])
    body0 = {b["index"]: (np.asarray(b["position"]), np.asarray(b.get("euler", [0, 0, 0])))
             for b in tabs["bodies"]}
    out = {}
    for e in tabs["p2p"]:
        if e["kind"] not in ("bump_stop", "rebound_stop"):
            continue
        pts, pts0 = [], []
        for end in ("marker_1", "marker_2"):
            mk = markers[e[end]]
            p = np.asarray(mk["position"], float)
            if mk["body"] == 0:
                pts.append(p)
                pts0.append(p)
                continue
            c0, a0 = body0[mk["body"]]
            R0 = Rotation.from_euler("ZYX", a0).as_matrix()
            R = Rotation.from_euler("ZYX", eul[slot[mk["body"]]]).as_matrix()
            pts.append(pos[slot[mk["body"]]] + R @ R0.T @ (p - c0))
            pts0.append(p)
        L = np.linalg.norm(pts[1] - pts[0])
        L_ref = np.linalg.norm(pts0[1] - pts0[0]) + float(e.get("seat_offset") or 0.0)
        s = L_ref - L
        cl = float(e.get("clearance") or 0.0)
        out[e["name"]] = cl - s if e["kind"] == "bump_stop" else cl + s
    return out


def test_design_state_is_at_ride_height_with_stops_clear_and_published_alignment(axle):
    name, cfg, model, eq, st = axle
    al = cfg["alignment"]
    assert bool(eq.converged) and bool(st.converged)
    # design wheel load = the load case's 5 kN (issue: within 5 %)
    np.testing.assert_allclose(np.asarray(eq.fz), 5000.0, rtol=0.05)
    # the static state under the step's 5 kN wheel loads is at design ride height (5 mm)
    wc = np.asarray(metrics.wheel_centre_position(model, st.r))
    z0 = np.asarray(kc.design_heights(model))
    assert np.all(np.abs(wc[:, 2] - z0) < 0.005), (wc[:, 2] - z0)
    # every stop at least 20 mm clear there
    clear = _stop_clearances(model, st.r)
    assert len(clear) == 4
    for k, v in clear.items():
        assert v >= 0.020, (k, v)
    # static alignment at design load, both sides, DIN 70000
    toe, camber = (np.asarray(a) * DEG for a in metrics.toe_camber(model, eq.r))
    np.testing.assert_allclose(toe, al["toe_deg"], atol=0.02)
    np.testing.assert_allclose(camber, al["camber_deg"], atol=0.02)


def test_published_spring_is_piecewise_linear_at_design():
    """The published main spring (22 kN/m straight middle segment, 4300 N at
    zero travel) keeps its straight segment: force at design travel + seat
    offset on the published line, rate 22 kN/m (the cubic used before bent
    it to 4130 N / 16 kN/m)."""
    from kernels.forces import p2p_law
    cfg = load_model_cfg("double_wishbone")
    model = build_model(build_tables(cfg))
    i = model.topology.p2p_names.index("main_spring_left")
    prm = jax.tree_util.tree_map(lambda a: a[i], model.elements["p2p"])
    L_design = float(prm["length"]) - cfg["per_side"]["p2p"]["main_spring"]["seat_offset"]
    for travel in (-0.05, 0.0, 0.01, 0.03):
        push = -float(p2p_law(prm, jnp.asarray(L_design - travel), 0.0))
        x = travel + cfg["per_side"]["p2p"]["main_spring"]["seat_offset"]
        expected = 2613.33 + (5546.67 - 2613.33) * (x + 0.0767) / (0.0567 + 0.0767)
        assert push == pytest.approx(expected, rel=1e-9), travel


def test_reference_bushing_carries_no_bind():
    """Tenfold radial stiffness of the reference bushing changes the double
    wishbone's wheel rate by less than 5 % (in an over-constrained linkage
    it rises steeply: that bushing would carry bind)."""
    model = build_model(build_tables(load_model_cfg("double_wishbone")))
    rows = [model.topology.bushing_names.index(f"longitudinal_link_body_{s}") for s in ("left", "right")]
    stiff = model.replace_elements(bushing={"k": model.elements["bushing"]["k"].at[jnp.array(rows)[:, None], jnp.array([0, 1])].multiply(10.0)})

    @jax.jit
    def rate(m):
        return kc.kc_metrics(m, kc.design_position(m))["wheel_rate"]
    r0, r1 = np.asarray(rate(model)), np.asarray(rate(stiff))
    assert np.all(np.abs(r1 / r0 - 1.0) < 0.05), (r0, r1)


# --------------------------------------------------------------------------- rigid-joint kinematics

def rigid_double_wishbone(cfg, travel):
    """Left carrier poses of the double wishbone with ideal joints, by loop
    closure of its hardpoints (incl. the static-alignment adjustments), for
    wheel-centre heights design + travel. Returns WC (n, 3) and toe, camber
    (n,) [deg] (DIN 70000 of the spin axis, left side)."""
    hp = {k: np.asarray(v, float) for k, v in cfg["hardpoints"].items()}
    bu = cfg["per_side"]["bushings"]
    shim = bu["upper_ball_joint"]["adjust"]["distance"] * _unit(bu["upper_ball_joint"]["adjust"]["direction"])
    tie = bu["tie_rod_outer"]["adjust"]["distance"]
    WC, N1, U1, Q = hp["WC"], hp["N1"], hp["U1"], hp["Q"]
    U1c = U1 + shim                                       # carrier-side socket of the upper ball joint
    L = {"O1": np.linalg.norm(N1 - hp["O1"]), "O2": np.linalg.norm(N1 - hp["O2"]),
         "V1": np.linalg.norm(U1 - hp["V1"]), "V2": np.linalg.norm(U1 - hp["V2"]),
         "P": np.linalg.norm(Q - hp["P"]) + tie}
    eul = np.radians(cfg["per_side"]["bodies"]["wheel"]["euler_deg"])
    spin0 = Rotation.from_euler("ZYX", eul).as_matrix()[:, 1]

    def pose(x):
        R = Rotation.from_rotvec(x[3:]).as_matrix()
        return lambda p: WC + x[:3] + R @ (p - WC), R

    def residual(x, z):
        f, _ = pose(x)
        return [np.linalg.norm(f(N1) - hp["O1"]) - L["O1"], np.linalg.norm(f(N1) - hp["O2"]) - L["O2"],
                np.linalg.norm(f(U1c) - hp["V1"]) - L["V1"], np.linalg.norm(f(U1c) - hp["V2"]) - L["V2"],
                np.linalg.norm(f(Q) - hp["P"]) - L["P"], f(WC)[2] - z]

    out_wc, toe, camber = [], [], []
    x = np.zeros(6)
    for s in travel:
        sol = scipy.optimize.root(residual, x, args=(WC[2] + s,), method="hybr", tol=1e-13)
        assert np.max(np.abs(sol.fun)) < 1e-12, sol.message
        x = sol.x
        f, R = pose(x)
        a = R @ spin0
        out_wc.append(f(WC))
        toe.append(np.arctan2(a[0], a[1]) * DEG)
        camber.append(-np.arcsin(a[2]) * DEG)
    return np.array(out_wc), np.array(toe), np.array(camber)


def test_kc_travel_with_stiff_joints_equals_rigid_joint_kinematics():
    """Every bushing 1000x stiffer in translation: the project's K&C
    wheel-travel curve (toe, camber, wheel-centre x / y) equals the
    rigid-joint loop closure of the same hardpoints to 1e-3 deg / 0.01 mm."""
    cfg = load_model_cfg("double_wishbone")
    model = build_model(build_tables(cfg))
    stiff = model.replace_elements(bushing={"k": model.elements["bushing"]["k"].at[:, :3].multiply(1000.0)})
    travel = np.linspace(-0.05, 0.05, 11)     # the stops (>= 60 mm clear) stay out of it

    @jax.jit
    def curve(m):
        eq0 = kc.design_position(m, tol=1e-4)
        return eq0, kc.travel_curve(m, eq0, travel, tol=1e-4)
    eq0, c = curve(stiff)
    assert bool(eq0.converged) and bool(np.all(c["converged"]))
    wc0 = np.asarray(metrics.wheel_centre_position(stiff, eq0.r))[0]
    wc = wc0 + np.asarray(c["wheel_centre_displacement"])[:, 0]
    toe = np.asarray(c["toe"])[:, 0] * DEG
    camber = np.asarray(c["camber"])[:, 0] * DEG
    rwc, rtoe, rcamber = rigid_double_wishbone(cfg, travel)
    np.testing.assert_allclose(wc[:, 2], rwc[:, 2], atol=2e-6)     # the prescribed height
    np.testing.assert_allclose(wc[:, :2] * 1000, rwc[:, :2] * 1000, atol=0.01)
    np.testing.assert_allclose(toe, rtoe, atol=1e-3)
    np.testing.assert_allclose(camber, rcamber, atol=1e-3)
    # and the curve is no flat line: the linkage moves the wheel
    assert np.ptp(rcamber) > 0.5 and np.ptp(rwc[:, 1]) > 0.002
