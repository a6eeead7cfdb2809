"""Quasi-static K&C (kernels/kc.py, kernels/statics.py): implicit derivatives
of the equilibrium, metrics against hand calculations and against
finite-difference loading of the full nonlinear model, reciprocity, and the
K&C load cases run as sweeps."""
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import xarray as xr

import kernels  # noqa: F401  (float64)
from kernels import kc, statics
from kernels.model import ModelError, build_model

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

def test_implicit_derivatives_of_the_equilibrium_match_finite_differences():
    """Reverse-mode derivatives of static and height-constrained equilibria w.r.t. stiffness scales, loads and heights (implicit function
    theorem, not unrolled Newton) against central differences."""
    import dataclasses
    base = build_model(toy_spring_axle())

    def with_scale(s):
        return dataclasses.replace(base, pp_k_scale=base.pp_k_scale.at[:3].multiply(s[0])
                                   .at[6:9].multiply(s[1]))

    u = jnp.zeros((2, 6)).at[:, 2].set(260.0).at[0, 1].set(150.0)

    def free(p):      # p = (scale0, scale1, Fy_left)
        m = with_scale(p)
        r = statics.static_equilibrium(m, u.at[0, 1].add(p[2])).r
        return jnp.stack([r[0, 0], r[0, 1], r[1, 2], r[0, 5], r[1, 3]])

    def constrained(p):   # p = (scale0, scale1, z_left)
        m = with_scale(p)
        eq = statics.constrained_equilibrium(m, jnp.zeros((2, 6)), jnp.array([p[2], 0.0]))
        return jnp.concatenate([eq.fz, eq.r[0, :2], eq.r[1, 4:5]])

    for f, p0, h in ((free, np.array([1.2, 0.8, 0.0]), np.array([1e-4, 1e-4, 1e-2])),
                     (constrained, np.array([1.2, 0.8, 0.01]), np.array([1e-4, 1e-4, 1e-6]))):
        P = np.concatenate([p0 + np.diag(h), p0 - np.diag(h)])

        @jax.jit
        def derivatives(p0, P):       # one compilation: reverse mode and the FD points
            return jax.jacrev(f)(p0), jax.vmap(f)(P)
        J_rev, vals = (np.asarray(a) for a in derivatives(jnp.asarray(p0), jnp.asarray(P)))
        fd = ((vals[:3] - vals[3:]) / (2 * h[:, None])).T
        np.testing.assert_allclose(J_rev, fd, rtol=1e-5, atol=1e-7 * np.abs(fd).max())


# --------------------------------------------------------------------------- the double wishbone

@pytest.fixture(scope="module")
def dw_kc(dw_model):
    """The double wishbone with brakes locked: design position, metrics, and
    the nonlinear load cases at +-small amplitudes (one compiled function;
    the four force analyses and the two travel modes vmapped)."""
    model = kc.lock_brakes(dw_model, kc.DEFAULT_BRAKE_LOCK)
    R = kc.DEFAULT_LOADED_RADIUS
    dirs = np.stack([kc.load_direction(an, R) for an in kc.FORCE_ANALYSES])
    dzs = np.stack([kc.travel_direction(mode) for mode in kc.TRAVEL_MODES])

    @jax.jit
    def run(model):
        eq = kc.design_position(model)
        forces = jax.vmap(lambda D: kc.force_curve(model, eq, np.array([-1.0, 1.0]), D))(dirs)
        travel = jax.vmap(lambda dz: kc.travel_curve(model, eq, np.array([-1e-4, 1e-4]), dz))(dzs)
        return {"metrics": kc.kc_metrics(model, eq, R), "eq": eq, "forces": forces, "travel": travel}
    out = jax.device_get(run(model))
    for i, an in enumerate(kc.FORCE_ANALYSES):
        out[an] = jax.tree_util.tree_map(lambda a: a[i], out["forces"])
    for i, mode in enumerate(kc.TRAVEL_MODES):
        out[mode] = jax.tree_util.tree_map(lambda a: a[i], out["travel"])
    return model, out


def test_double_wishbone_metrics_match_finite_difference_loading(dw_kc):
    """Every metric (derivative at the design position) against central
    differences of the full nonlinear model loaded at +-1 N (+-1 N m for the
    aligning torque; +-0.1 mm of wheel travel), both sides."""
    model, out = dw_kc
    M = out["metrics"]
    assert bool(out["eq"].converged)
    sign = kc.SIDE_SIGN

    def fd(o, key, h):
        assert np.all(o["converged"])
        return (o[key][1] - o[key][0]) / (2 * h)
    checks = {}
    for an, per in (("lateral_force", 1e3), ("traction_force", 1e3), ("braking_force", 1e3),
                    ("aligning_torque", 1e2)):
        o = out[an]
        checks[f"toe_per_{an}"] = fd(o, "toe", 1.0) * per * DEG
        checks[f"camber_per_{an}"] = fd(o, "camber", 1.0) * per * DEG
        w = fd(o, "wheel_centre_displacement", 1.0) * per * 1e3
        if an == "lateral_force":
            checks["lateral_compliance"] = -sign * w[:, 1]
        elif an == "traction_force":
            checks["longitudinal_compliance"] = w[:, 0]
        elif an == "braking_force":
            checks["longitudinal_compliance_braking"] = -w[:, 0]
    for mode, pre in (("parallel", ""), ("opposite", "roll_")):
        o = out[mode]
        own = np.ones(2) if mode == "parallel" else sign
        checks[pre + ("bump_steer" if mode == "parallel" else "steer")] = fd(o, "toe", 1e-4) / own * DEG
        checks[pre + "camber_gain"] = fd(o, "camber", 1e-4) / own * DEG
        checks[pre + "wheel_rate"] = fd(o, "wheel_load", 1e-4)[:, 2] / own / 1e3
    # the geometry metrics have their own oracles (tests/kernels/test_kc_geometry.py);
    # the wind-up is checked by hand above and against the leaf-spring axle's beam model
    assert set(checks) == set(kc.METRICS) - {"design_wheel_load", "design_toe", "design_camber", "wind_up"} \
        - set(kc.GEOMETRY_METRICS)
    for name, value in checks.items():
        np.testing.assert_allclose(M[name], value, rtol=1e-5, err_msg=name)
    # a symmetric axle gives the same value on both sides (sign conventions per side)
    for name in kc.METRICS:
        np.testing.assert_allclose(M[name][0], M[name][1], rtol=1e-6, atol=1e-12, err_msg=name)
    # the design position: wheel centres at design height
    wc = np.asarray(out["eq"].r)[np.asarray(model.topology.wheel_slots), 2]
    np.testing.assert_allclose(wc, np.asarray(model.r_design)[np.asarray(model.topology.wheel_slots), 2],
                               atol=1e-12)


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
    from tests.e2e.test_app import cfg_of
    return cfg_of("model=toy_trailing_arm", *over)


@pytest.fixture(scope="module")
def toy_direct():
    """Metrics of the nominal toy axle computed directly with the kernels."""
    from sweep.model_builder import model_from_config
    model = kc.lock_brakes(model_from_config(_kc_cfg().model), kc.DEFAULT_BRAKE_LOCK)
    eq = jax.jit(kc.design_position)(model)
    return jax.device_get(jax.jit(kc.kc_metrics)(model, eq, kc.DEFAULT_LOADED_RADIUS))


@pytest.fixture(scope="module")
def kc_cube(tmp_path_factory):
    """Four variants of the travel load case, the third with an absurd bushing
    softening that breaks its equilibrium; run through the pipeline (sweep.engine.run)."""
    d = tmp_path_factory.mktemp("kc")
    csv = d / "design.csv"
    csv.write_text("\n".join(["soft", "1.0", "0.7", "1e-12", "1.3"]) + "\n")
    path = d / "travel.zarr"
    over = ["loadcase=kc_wheel_travel", "loadcase.travel=[-0.04,0.04]", "loadcase.steps=5",
            "sweep=table", f"sweep.table={csv}", "sweep.chunk_size=4", "~sweep.parameters",
            "+sweep.parameters.soft.target=bushing.stiffness", "+sweep.parameters.soft.elements=*",
            "+sweep.parameters.soft.bounds=[1e-12,2.0]", "+sweep.parameters.soft.scale=log",
            f"output.path={path}"]
    from omegaconf import OmegaConf
    from sweep import engine
    from sweep.kinds import kind_of
    cfg = _kc_cfg(*over)
    summary = engine.run(kind_of(cfg), cfg, OmegaConf.to_yaml(cfg), progress=False)   # kind from loadcase.kind
    assert summary["kind"] == "kc" and summary["variants_run"] == 4
    return path, over


def test_kc_sweep_writes_a_cube_with_units_and_isolates_failures(kc_cube, toy_direct):
    path, _ = kc_cube
    ds = xr.open_zarr(path)
    assert list(ds.status.values) == [0, 0, 1, 0]
    assert ds.attrs["cube_kind"] == "kc" and ds.status.attrs["flag_meanings"].split()[5] == "load_step_failed"
    assert ds.sizes["travel"] == 5 and list(ds.side.values) == ["left", "right"]
    np.testing.assert_allclose(ds.travel.values, np.linspace(-0.04, 0.04, 5))
    assert ds.travel.attrs["units"] == "m"
    for name, (units, _) in kc.METRICS.items():
        assert ds[name].attrs["units"] == units and ds[name].dims == ("variant", "side")
    assert ds.compliance_matrix.dims == ("variant", "side", "dof", "component")
    assert ds.attrs["brake_locked_bushings"] == ["wheel_bearing_left", "wheel_bearing_right"]
    assert np.all(np.isnan(ds.toe.values[2])) and np.all(np.isnan(ds.wheel_rate.values[2]))
    ok = [0, 1, 3]
    assert np.all(np.isfinite(ds.toe.values[ok])) and np.all(ds.converged.values[ok] == 1)
    # variant 0 is the nominal axle: its metrics equal the direct kernel run
    for name in kc.METRICS:
        # (atol: the toy has no anti-roll bar, its bar rate is a difference of equal rates, ~1e-15)
        np.testing.assert_allclose(ds[name].values[0], toy_direct[name], rtol=1e-9, atol=1e-9, err_msg=name)
    np.testing.assert_allclose(ds.compliance_matrix.values[0], toy_direct["compliance_matrix"], rtol=1e-9)
    # the travel curve: 0 is the design position, the wheel centre follows the
    # prescribed height, the wheel load rises with bump
    i0 = int(np.argmin(np.abs(ds.travel.values)))
    np.testing.assert_allclose(ds.wheel_centre_displacement.values[0, i0], 0.0, atol=1e-12)
    np.testing.assert_allclose(ds.wheel_centre_displacement.sel(axis="z").values[0, :, 0],
                               ds.travel.values, atol=1e-10)
    fz = ds.wheel_load.sel(component="fz").values[0, :, 0]
    assert np.all(np.diff(fz) > 0)
    np.testing.assert_allclose(fz[i0], toy_direct["design_wheel_load"][0], rtol=1e-9)
    # the stiffness parameter acts: stiffer bushings -> smaller longitudinal compliance
    lc = ds.longitudinal_compliance.values[:, 0]
    assert lc[3] < lc[0] < lc[1]
    np.testing.assert_allclose(ds.soft.values, [1.0, 0.7, 1e-12, 1.3])


def test_kc_rerun_is_a_no_op_and_bad_config_is_one_line(kc_cube, capsys, tmp_path):
    from sweep.app import main
    path, over = kc_cube
    before = xr.open_zarr(path).toe.values.copy()
    capsys.readouterr()
    # python -m sweep with a K&C load case: same job, nothing left to run, K&C summary
    assert main(_kc_cfg(*over), progress=False) == 0
    out = capsys.readouterr().out
    assert "nothing to run" in out and "K&C metrics of variant 0" in out, out
    np.testing.assert_array_equal(xr.open_zarr(path).toe.values, before)
    for bad, msg in (("loadcase.mode=diagonal", "loadcase.mode = 'diagonal' is not one of parallel, opposite"),
                     ("loadcase.steps=0", "loadcase.steps = 0 must be >= 1"),
                     ("loadcase.loaded_radius=-0.3", "loadcase.loaded_radius = -0.3 must be > 0"),
                     ("+loadcase.travle=[0,1]", "loadcase.travle: unknown key")):
        cfg = _kc_cfg("loadcase=kc_wheel_travel", bad, f"output.path={tmp_path}/x.zarr")
        assert main(cfg, progress=False) == 2
        err = capsys.readouterr().err.strip()
        assert msg in err and len(err.splitlines()) == 1, err
        assert not os.path.exists(tmp_path / "x.zarr")


def test_force_load_case_layout_without_compute(tmp_path):
    """A force load case's amplitudes, step dimension and units (validated and
    laid out before any compute; its curves are the kernels' force_curve,
    checked against the metrics on the double wishbone above)."""
    from sweep.engine.layout import store_spec
    from sweep.kinds.kc import KIND
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


def test_toy_travel_metrics_match_finite_differences_in_both_modes():
    """The wheel-travel metrics of the trailing-arm toy axle (parallel and
    opposite travel: bump steer, camber gain, wheel rate, each per the
    side's own travel) against central differences of its nonlinear travel
    curve at +-0.1 mm - the cheap twin of the double-wishbone check above."""
    from sweep.model_builder import model_from_config
    model = kc.lock_brakes(model_from_config(_kc_cfg().model), kc.DEFAULT_BRAKE_LOCK)
    dzs = np.stack([kc.travel_direction(mode) for mode in kc.TRAVEL_MODES])

    @jax.jit
    def run(model):
        eq = kc.design_position(model)
        travel = jax.vmap(lambda dz: kc.travel_curve(model, eq, np.array([-1e-4, 1e-4]), dz))(dzs)
        return kc.kc_metrics(model, eq, kc.DEFAULT_LOADED_RADIUS, with_geometry=False), travel
    M, travel = jax.device_get(run(model))
    sign = kc.SIDE_SIGN
    for i, (mode, pre) in enumerate((("parallel", ""), ("opposite", "roll_"))):
        assert kc.TRAVEL_MODES[i] == mode
        o = jax.tree_util.tree_map(lambda a: a[i], travel)
        assert np.all(o["converged"])
        own = np.ones(2) if mode == "parallel" else sign
        fd = {k: (o[k][1] - o[k][0]) / 2e-4 for k in ("toe", "camber", "wheel_load")}
        checks = {pre + ("bump_steer" if mode == "parallel" else "steer"): fd["toe"] / own * DEG,
                  pre + "camber_gain": fd["camber"] / own * DEG,
                  pre + "wheel_rate": fd["wheel_load"][:, 2] / own / 1e3}
        for name, value in checks.items():
            assert np.all(np.abs(value) > 1e-3) or name.endswith("steer"), (name, value)
            np.testing.assert_allclose(M[name], value, rtol=1e-5, atol=1e-9, err_msg=name)


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
