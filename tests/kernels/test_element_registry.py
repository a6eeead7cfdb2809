"""Force-element groups as a named registry (kernels.forces.ElementGroup).

A test-only element type - a linear torsion spring (and damper) between two
bodies - is registered from this file only, added to the double-wishbone axle
through its model YAML, and run end to end: tables and validation, the
topology and the block pattern, the generalised forces and their element
Jacobians (autodiff vs central differences), static equilibrium, LSRT2 steps
and a swept parameter. Oracles: central differences; the axle without the
element (k = c = 0); scipy's rotation of the equilibrium body poses (the
spring torque is k times the relative rotation angle); and an independent
implementation of the same law by the built-in bushing group (a bushing with
rotational stiffness and damping only: its torque Rm1 Jl^-T(theta) k theta =
Rm1 k theta, method.md section 1).

The group is registered under a unique name in a module fixture and removed
in its finalizer, so it does not leak into other tests.
"""
import copy

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import kernels  # noqa: F401  (float64)
from kernels import blocks, dynamics, forces, integrate, loads, metrics, statics
from kernels.methods import METHODS
from kernels.model import ModelError, build_model
from kernels.rotations import euler_to_matrix, mm, mtm, mtv, mv, rotation_vector
from kernels.system import model_system
from sweep.model_builder import build_tables
from tests.conftest import load_model_cfg, random_state

NAME = "test_torsion_spring"          # unique: registered by this file only
TABLE = "test_torsion_springs"
K_TORSION = 400.0                     # N m/rad
C_TORSION = 2.0                       # N m s/rad


# ----------------------------------------------------------------------------- the test-only element
def torsion_element(prm, x1, x2):
    """Torsion spring-damper between two markers' frames (marker-1 frame law):
    theta = log(Rm1^T Rm2) [rad], w_rel = Rm1^T (omega_2 - omega_1) [rad/s];
    torque on body 1: Rm1 (k theta + c w_rel) [N m] (pulls body 1 towards
    body 2's orientation), on body 2 the reaction; no force."""
    R1, R2 = euler_to_matrix(x1[3:6]), euler_to_matrix(x2[3:6])
    Rm1, Rm2 = mm(R1, prm["rot1"]), mm(R2, prm["rot2"])
    theta = rotation_vector(mtm(Rm1, Rm2))
    w_rel = mtv(Rm1, mv(R2, x2[9:12]) - mv(R1, x1[9:12]))
    M = mv(Rm1, prm["k"] * theta + prm["c"] * w_rel)
    zero = jnp.zeros(3, M.dtype)
    return jnp.concatenate([zero, mtv(R1, M)]), jnp.concatenate([zero, -mtv(R2, M)])


def torsion_build(rows, ends):
    """Rows -> parameters: marker axes in the body frames, k [N m/rad], c [N m s/rad]."""
    return {"rot1": ends["rot1"], "rot2": ends["rot2"],
            "k": np.array([float(e["stiffness"]) for e in rows]),
            "c": np.array([float(e.get("damping", 0.0)) for e in rows])}


def torsion_validate(row, where):
    for fld, required in (("stiffness", True), ("damping", False)):
        v = row.get(fld, None if required else 0.0)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v) or v < 0:
            raise ModelError(f"{where}.{fld} = {v!r} must be a number >= 0")


TORSION = forces.ElementGroup(NAME, TABLE, torsion_element, build=torsion_build,
                              validate=torsion_validate, targets={"stiffness": ("k", None)})


@pytest.fixture(scope="module")
def torsion_group():
    forces.register_group(TORSION)
    yield TORSION
    forces.unregister_group(NAME)
    assert NAME not in forces.GROUPS


def dw_cfg(k=K_TORSION, c=C_TORSION, as_bushing=False, both=None):
    """The double-wishbone YAML with a torsion spring between upper arm and
    lower link per side (bodies not joined by any other element); or the same
    law as a bushing with rotational stiffness and damping only.
    ``both = (k_b, c_b)``: the torsion spring (k, c) and that bushing with
    rates (k_b, c_b) side by side - models that differ in values only share
    one topology, hence one compilation."""
    cfg = load_model_cfg()
    spec = {"bodies": ["upper_arm", "lower_link"], "at": "U1", "axis": {"along": ["V1", "V2"]}}
    if as_bushing or both is not None:
        kb, cb = (k, c) if both is None else both
        cfg["per_side"]["bushings"]["arm_twist" if both is None else "arm_twist_bushing"] = {
            **spec, "stiffness": [0.0, 0.0, 0.0, kb, kb, kb], "damping": [0.0, 0.0, 0.0, cb, cb, cb]}
    if not as_bushing:
        cfg["per_side"][TABLE] = {"arm_twist": {**spec, "stiffness": k, "damping": c}}
    return cfg


@pytest.fixture(scope="module")
def tor_tables(torsion_group):
    return build_tables(dw_cfg())


@pytest.fixture(scope="module")
def tor_model(tor_tables):
    return build_model(tor_tables)


def slots(model, *names):
    return [model.topology.body_names.index(n) for n in names]


# ----------------------------------------------------------------------------- registry
def test_registry_holds_the_builtin_groups_and_refuses_clashes(torsion_group):
    assert list(forces.GROUPS)[:2] == ["bushing", "p2p"]
    assert forces.GROUPS["bushing"].table_key == "bushings" and forces.GROUPS["p2p"].table_key == "p2p"
    assert forces.GROUPS[NAME] is TORSION
    with pytest.raises(ValueError, match="already registered"):
        forces.register_group(TORSION)
    other = forces.ElementGroup("test_other", TABLE, torsion_element, build=torsion_build)
    with pytest.raises(ValueError, match="table key"):
        forces.register_group(other)
    with pytest.raises(ValueError, match="needs 'build'"):
        forces.register_group(forces.ElementGroup("test_nobuild", "test_nobuild", torsion_element))
    with pytest.raises(ValueError, match="built in"):
        forces.unregister_group("bushing")
    tmp = forces.ElementGroup("test_tmp", "test_tmp", torsion_element, build=torsion_build)
    with forces.registered(tmp):
        assert forces.GROUPS["test_tmp"] is tmp
    assert "test_tmp" not in forces.GROUPS


def test_yaml_section_tables_and_model(torsion_group, tor_tables, tor_model, dw_model, dw_tables):
    rows = tor_tables[TABLE]
    assert [r["name"] for r in rows] == ["arm_twist_left", "arm_twist_right"]
    assert rows[0]["stiffness"] == K_TORSION and rows[0]["damping"] == C_TORSION
    topo = tor_model.topology
    assert topo.extra_groups == (TORSION,)
    assert topo.group_names[NAME] == ("arm_twist_left", "arm_twist_right")
    np.testing.assert_array_equal(topo.group_bodies[NAME][0], slots(tor_model, "upper_arm_left", "lower_link_left"))
    np.testing.assert_array_equal(topo.group_bodies[NAME][1], slots(tor_model, "upper_arm_right", "lower_link_right"))
    np.testing.assert_array_equal(tor_model.elements[NAME]["k"], [K_TORSION] * 2)
    assert tor_model.elements[NAME]["k"].dtype == jnp.float64
    assert topo.n_force_elements == dw_model.topology.n_force_elements + 2
    # the built-in groups and every other table are untouched
    assert topo.bushing_names == dw_model.topology.bushing_names
    for f in ("bu_k", "bu_pos1", "pp_length", "mass", "r_design"):
        np.testing.assert_array_equal(getattr(tor_model, f), getattr(dw_model, f))
    assert topo != dw_model.topology and hash(topo) != hash(dw_model.topology)
    assert build_model(tor_tables).topology == topo          # structural equality
    # the group is part of the topology's identity: a different group object
    # with the same name and elements gives a different topology (no stale jit cache)
    forces.unregister_group(NAME)
    try:
        twin = forces.ElementGroup(NAME, TABLE, torsion_element, build=torsion_build)
        with forces.registered(twin):
            assert build_model(tor_tables).topology != topo
    finally:
        forces.register_group(TORSION)
    # the same model YAML without the section is the plain axle
    assert build_model(dw_tables).topology == dw_model.topology


def test_block_pattern_gains_the_new_body_pair(tor_model, dw_model):
    base, new = blocks.model_pattern(dw_model.topology), blocks.model_pattern(tor_model.topology)
    for side in ("left", "right"):
        i, j = slots(tor_model, f"upper_arm_{side}", f"lower_link_{side}")
        assert (i, j) not in base.index and (j, i) not in base.index
        assert (i, j) in new.index and (j, i) in new.index
    assert new.n == base.n + 4
    assert set(base.index) < set(new.index)


def test_unknown_marker_and_bad_field_raise_model_error(torsion_group, tor_tables):
    bad = copy.deepcopy(tor_tables)
    bad[TABLE][0]["marker_2"] = 9999
    with pytest.raises(ModelError, match=rf"{TABLE}\[0\] 'arm_twist_left'\.marker_2 = 9999 is not a marker index"):
        build_model(bad)
    bad = copy.deepcopy(tor_tables)
    bad[TABLE][1]["stiffness"] = -5.0
    with pytest.raises(ModelError, match=rf"{TABLE}\[1\] 'arm_twist_right'\.stiffness = -5.0"):
        build_model(bad)
    bad = copy.deepcopy(tor_tables)
    bad[TABLE][1]["marker_1"] = bad[TABLE][1]["marker_2"]
    with pytest.raises(ModelError, match="both markers are on body"):
        build_model(bad)
    cfg = dw_cfg()
    cfg["per_side"][TABLE]["arm_twist"]["bodies"] = ["upper_arm", "no_such_body"]
    with pytest.raises(ModelError, match=rf"model\.{TABLE}\.arm_twist_left\.bodies = 'no_such_body'"):
        build_tables(cfg)


def test_element_jacobian_autodiff_equals_central_differences(tor_model):
    """The group has no closed-form Jacobian: kernels.dynamics differentiates
    the element (forward mode, eq. 5). Element level and model level (the
    block linearisation of the axle) against central differences."""
    prm = jax.tree_util.tree_map(lambda a: a[0], tor_model.elements[NAME])
    rng = np.random.default_rng(3)
    x1 = jnp.asarray(np.concatenate([rng.normal(0, 0.1, 3), rng.normal(0, 0.3, 3), rng.normal(0, 1.0, 6)]))
    x2 = jnp.asarray(np.concatenate([rng.normal(0, 0.1, 3), rng.normal(0, 0.3, 3), rng.normal(0, 1.0, 6)]))
    (g1, g2), d1, d2 = dynamics._element_jac(torsion_element, (0, 1))(prm, x1, x2)
    eps = 1e-6
    for b, d in ((0, d1), (1, d2)):
        fd = np.zeros((2, 6, 12))
        for k in range(12):
            e = np.zeros(12)
            e[k] = eps
            xs_p, xs_m = [x1, x2], [x1, x2]
            xs_p[b], xs_m[b] = xs_p[b] + e, xs_m[b] - e
            gp, gm = torsion_element(prm, *xs_p), torsion_element(prm, *xs_m)
            fd[:, :, k] = (np.stack(gp) - np.stack(gm)) / (2 * eps)
        np.testing.assert_allclose(np.stack(d), fd, rtol=1e-7, atol=1e-7 * np.abs(fd).max())
    # model level: the group's share of the block linearisation (the model
    # minus the same model with k = c = 0: same topology, same other
    # elements) in the four blocks of the left spring's bodies equals central
    # differences of the element at the bodies' states
    r, v = random_state(tor_model, seed=5)
    u = jnp.zeros((2, 6))
    lin_fn = jax.jit(dynamics.linearise_blocks)
    lin, lin0 = lin_fn(tor_model, r, v, u), lin_fn(dataclasses_replace_elements(tor_model, k=0.0, c=0.0), r, v, u)
    pattern = blocks.model_pattern(tor_model.topology)
    i, j = slots(tor_model, "upper_arm_left", "lower_link_left")
    x = dynamics.states_with_ground(r, v)
    for b, col in ((0, i), (1, j)):
        fd = np.zeros((2, 6, 12))
        for k in range(12):
            e = np.zeros(12)
            e[k] = eps
            xs_p, xs_m = [x[i], x[j]], [x[i], x[j]]
            xs_p[b], xs_m[b] = xs_p[b] + e, xs_m[b] - e
            fd[:, :, k] = (np.stack(torsion_element(prm, *xs_p)) - np.stack(torsion_element(prm, *xs_m))) / (2 * eps)
        for a_, row in ((0, i), (1, j)):
            s_ = pattern.slot(row, col)
            got = np.concatenate([np.asarray(lin.G_r[s_] - lin0.G_r[s_]), np.asarray(lin.G_v[s_] - lin0.G_v[s_])], 1)
            np.testing.assert_allclose(got, fd[a_], rtol=1e-6, atol=1e-6 * np.abs(fd).max())
        assert np.abs(fd).max() > 10.0


@pytest.fixture(scope="module")
def step_runs(torsion_group, tor_model, dw_model, step_excitation):
    """Equilibria and 20 LSRT2 steps (h = 1 ms) from 4.99 s over the load
    step at 5 s: plain axle, torsion k = c = 0, torsion (k, c), and the same
    law as a rotational-only bushing. The dense solver: the group's blocks
    enter the assembled Jacobian as any element's (its block linearisation
    is checked above); the block solver cost this fixture a minute more of
    compilation."""
    u = loads.u_at(step_excitation, 4.9)
    # one topology for the three variants (torsion spring and rotational
    # bushing side by side, the unused one at zero rates): the equilibrium
    # and the 20 steps compile once for them, once more for the plain axle
    zero = build_model(build_tables(dw_cfg(0.0, 0.0, both=(0.0, 0.0))))
    tor = build_model(build_tables(dw_cfg(both=(0.0, 0.0))))
    bush = build_model(build_tables(dw_cfg(0.0, 0.0, both=(K_TORSION, C_TORSION))))
    assert zero.topology == tor.topology == bush.topology
    out = {}
    for key, model in (("base", dw_model), ("zero", zero), ("torsion", tor), ("bushing", bush)):
        eq = equilibrium(model, u)
        assert bool(eq.converged), key
        traj = lsrt2_steps(model, step_excitation, eq.r)
        out[key] = (model, eq, {k: np.asarray(a) for k, a in traj.items()})
    return out


equilibrium = jax.jit(statics.static_equilibrium)


@jax.jit
def lsrt2_steps(model, exc, r_eq):
    """20 LSRT2 steps (h = 1 ms, dense solver, relinearised every step) from
    rest at r_eq from t = 4.99 s; channels: wheel-centre displacement [m],
    toe and camber [rad], bushing forces [N, N m] (kernels.metrics)."""
    m = model.topology.n_bodies

    def out(r, v, t):
        r, v = r.reshape(m, 6), v.reshape(m, 6)
        toe, camber = metrics.toe_camber(model, r)
        return {"wheel_centre_displacement": metrics.wheel_centre_position(model, r)
                - metrics.wheel_centre_position(model, r_eq),
                "toe": toe, "camber": camber, "bushing_force": metrics.bushing_forces(model, r, v)}
    n = r_eq.size
    return integrate.simulate(METHODS["lsrt2"], model_system(model, exc, "dense"), r_eq.reshape(-1),
                              jnp.zeros(n, r_eq.dtype), 4.99, 1e-3, 20, 1, 1, out).outputs


def dataclasses_replace_elements(model, **values):
    import dataclasses
    prm = dict(model.elements[NAME])
    prm.update({k: jnp.full_like(prm[k], v) for k, v in values.items()})
    return dataclasses.replace(model, elements={**model.elements, NAME: prm})


CHANNELS = ("wheel_centre_displacement", "toe", "camber")


def test_zero_stiffness_reproduces_the_axle(step_runs):
    (m0, eq0, base), (mz, eqz, zero) = step_runs["base"], step_runs["zero"]
    np.testing.assert_allclose(np.asarray(eqz.r), np.asarray(eq0.r), rtol=0, atol=1e-12)
    # the zero model's bushings: the axle's, plus the zero-rate twist bushings
    names = mz.topology.bushing_names
    zero = dict(zero, bushing_force=zero["bushing_force"][:, [names.index(n) for n in m0.topology.bushing_names]])
    for ch in CHANNELS + ("bushing_force",):
        scale = np.abs(base[ch]).max()
        np.testing.assert_allclose(zero[ch], base[ch], rtol=0, atol=1e-10 * scale, err_msg=ch)
    # the load step moves the wheel: the comparison is not of constants
    assert np.ptp(base["wheel_centre_displacement"][:, 0, 0]) > 1e-5


def test_torsion_spring_equals_the_rotational_bushing(step_runs):
    """Independent implementation of the same law (built-in bushing group,
    closed-form Jacobian) gives the same equilibrium and trajectory."""
    (_, eqt, tor), (_, eqb, bus), (_, eq0, _) = step_runs["torsion"], step_runs["bushing"], step_runs["base"]
    np.testing.assert_allclose(np.asarray(eqt.r), np.asarray(eqb.r), rtol=0, atol=1e-10)
    for ch in CHANNELS:
        scale = np.abs(bus[ch]).max()
        np.testing.assert_allclose(tor[ch], bus[ch], rtol=0, atol=1e-8 * scale, err_msg=ch)
    # and the spring matters: it moves the equilibrium by far more than that
    assert np.abs(np.asarray(eqt.r) - np.asarray(eq0.r)).max() > 1e-6


def test_equilibrium_torque_is_k_times_the_relative_angle(step_runs):
    """At the equilibrium with the spring, the element's torque on the lower
    link (vehicle frame) is -k phi, phi = rotation vector of D_j D_i^T, D_a =
    the rotation of body a from its design pose (scipy, from the body
    angles; the two marker frames coincide at the design pose): magnitude k
    times the relative angle. And the spring reduces that angle compared
    with the axle without it."""
    model, eqt, _ = step_runs["torsion"]
    _, eq0, _ = step_runs["base"]
    i, j = slots(model, "upper_arm_left", "lower_link_left")
    R = lambda e: Rotation.from_euler("ZYX", np.asarray(e)).as_matrix()  # noqa: E731  z-y'-x''
    rd = np.asarray(model.r_design)

    def phi(r):
        r = np.asarray(r)
        Di, Dj = R(r[i, 3:]) @ R(rd[i, 3:]).T, R(r[j, 3:]) @ R(rd[j, 3:]).T
        return Rotation.from_matrix(Dj @ Di.T).as_rotvec()
    ph = phi(eqt.r)
    assert np.linalg.norm(ph) > 1e-4
    x = dynamics.states_with_ground(eqt.r, jnp.zeros_like(eqt.r))
    prm = jax.tree_util.tree_map(lambda a: a[0], model.elements[NAME])
    g1, g2 = torsion_element(prm, x[i], x[j])
    assert np.all(np.asarray(g1[:3]) == 0) and np.all(np.asarray(g2[:3]) == 0)
    M2 = R(np.asarray(eqt.r)[j, 3:]) @ np.asarray(g2[3:])            # on the lower link, vehicle frame
    M1 = R(np.asarray(eqt.r)[i, 3:]) @ np.asarray(g1[3:])
    np.testing.assert_allclose(M2, -K_TORSION * ph, rtol=1e-9, atol=1e-9 * K_TORSION * np.abs(ph).max())
    np.testing.assert_allclose(M1, -M2, rtol=1e-12, atol=1e-12 * np.abs(M2).max())
    np.testing.assert_allclose(np.linalg.norm(M2), K_TORSION * np.linalg.norm(ph), rtol=1e-9)
    assert np.linalg.norm(ph) < np.linalg.norm(phi(eq0.r))


def test_sweep_parameter_on_the_registered_group(tor_model):
    from sweep.params import build_parameters
    spec = {"twist": {"target": f"{NAME}.stiffness", "elements": "*_left", "bounds": [0.1, 10.0]},
            "bush": {"target": "bushing.stiffness", "elements": "upper_arm_*", "directions": "radial",
                     "bounds": [0.5, 2.0]}}
    pset = build_parameters(spec, tor_model)
    m = pset.apply(tor_model, jnp.array([3.0, 1.5]))
    np.testing.assert_array_equal(m.elements[NAME]["k"], [3.0 * K_TORSION, K_TORSION])
    np.testing.assert_array_equal(m.elements[NAME]["rot1"], tor_model.elements[NAME]["rot1"])
    assert float(m.bu_k_scale[tor_model.topology.bushing_names.index("upper_arm_rear_left"), 0]) == 1.5
    assert m.topology == tor_model.topology
    # differentiable with respect to the parameter
    g = jax.grad(lambda th: jnp.sum(pset.apply(tor_model, th).elements[NAME]["k"]))(jnp.array([1.0, 1.0]))
    np.testing.assert_allclose(g, [K_TORSION, 0.0])
    from sweep.schema import ConfigError
    with pytest.raises(ConfigError, match="matches no"):
        build_parameters({"t": {"target": f"{NAME}.stiffness", "elements": "nope", "bounds": [0.5, 2]}},
                         tor_model)
