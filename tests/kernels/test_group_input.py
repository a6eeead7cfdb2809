"""An element group that reads a time-varying input of its own
(``kernels.forces.ElementGroup.input``): a point-contact tyre written here,
outside ``kernels/``, between the ground and a wheel guided vertically,
which reads the road height and its rate under it at the stage's time -
the road under a tyre as an ordinary element group (the toy axle with it
on both backends: tests/e2e/test_user_element_job.py).

Oracle: the same physics through the built-in route, which the rough road
uses: a vertical bushing between the ground and the wheel with the tyre's
rate and damping, and the road's part k z + c dz/dt of the tyre force as
harmonics of the wheel-centre force input (``kernels.road.wheel_force_harmonics``).
Both start from the same static equilibrium (the input at rest: the road's
mean height) and must run the same response to round-off (the block
solver; every solver shares the input Jacobian's product,
kernels.linsolve); the road moves the wheel by millimetres, and without
the input's rate in the methods' J_u du/dt term the two differ by 3e-7 m
(the test can fail). The generated backend runs such a group too
(tests/e2e/test_user_element_job.py). A group that declares an input but
builds none, or one of another shape, or with state events, is refused.
"""
import copy

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import kernels  # noqa: F401  (float64)
from kernels import forces, loads, statics
from kernels.lsrt2 import LSRT2
from kernels.model import ModelError, build_model
from kernels.road import RoadProfile, wheel_force_harmonics
from kernels.system import model_system
from sweep.axle.builder import build_tables
from tests.conftest import load_model_cfg

K_TYRE = 2.0e5          # N/m
C_TYRE = 150.0          # N s/m
OMEGA = np.array([2 * np.pi * 1.3, 2 * np.pi * 4.1, 2 * np.pi * 11.0])     # rad/s
COS = np.array([[0.004, -0.002], [0.0015, 0.001], [-0.0005, 0.0007]])      # m, (harmonic, side)
SIN = np.array([[-0.001, 0.003], [0.002, -0.0012], [0.0004, 0.0002]])     # m


def tyre_input(prm, t):
    """Road height z [m] and its rate [m/s] under the tyre at time t [s]."""
    ph = prm["omega"] * t
    z = jnp.sum(prm["cos"] * jnp.cos(ph) + prm["sin"] * jnp.sin(ph))
    zd = jnp.sum(prm["omega"] * (prm["sin"] * jnp.cos(ph) - prm["cos"] * jnp.sin(ph)))
    return jnp.stack([z, zd])


def tyre_element(prm, x1, x2):
    """Vertical spring-damper from the road point below the wheel's marker to
    the marker: force on the wheel k (z_road - dz) + c (dz_road/dt - dz/dt)
    [N] (dz: the marker's height from its design position), at the marker."""
    pm2, vm2, p2, R2, _ = forces.marker_kinematics(x2, prm["pos2"])
    z_road, zd_road = prm["input"][0], prm["input"][1]
    fz = prm["k"] * (z_road - (pm2[2] - prm["z0"])) + prm["c"] * (zd_road - vm2[2])
    F = jnp.array([0.0, 0.0, 1.0]) * fz
    M2 = jnp.cross(pm2 - p2, F)
    return jnp.concatenate([-F, jnp.zeros(3)]), jnp.concatenate([F, forces.mtv(R2, M2)])


def tyre_build(rows, ends):
    n = len(rows)
    return {"pos2": ends["pos2"], "z0": ends["point2"][:, 2],
            "k": np.array([float(e["rate"]) for e in rows]), "c": np.array([float(e["damping"]) for e in rows]),
            "omega": np.array([e["omega"] for e in rows], float), "cos": np.array([e["cos"] for e in rows], float),
            "sin": np.array([e["sin"] for e in rows], float), "input": np.zeros((n, 2))}


ROAD_TYRE = forces.ElementGroup("test_road_tyre", "test_road_tyres", tyre_element, build=tyre_build,
                                input=tyre_input)


MASS = 400.0            # kg: the wheel and its share of the body, one corner


def rig_with(route):
    """One body guided vertically (a bushing free along z) on a tyre to the
    ground: the built-in route (a vertical bushing; the road's force is
    then a wheel-load input) or the tyre group. Both wheels of the tables
    are the one body (the wheel-load input of the right side is zero)."""
    tables = {"name": "tyre_rig", "gravity": [0.0, 0.0, -9.81],
              "bodies": [{"index": 1, "name": "wheel", "mass": MASS, "inertia": np.eye(3).tolist(),
                          "position": [0.0, 0.0, 0.3]}],
              "markers": [{"index": 1, "name": "road", "body": 0, "position": [0.0, 0.0, 0.3]},
                          {"index": 2, "name": "hub", "body": 1, "position": [0.0, 0.0, 0.3]}],
              "bushings": [{"index": 1, "name": "guide", "marker_1": 1, "marker_2": 2,
                            "stiffness": [1e6, 1e6, 0.0, 1e4, 1e4, 1e4], "damping": [0.0] * 6}],
              "p2p": [], "wheels": {"left": 1, "right": 1}}
    if route == "bushing":
        tables["bushings"].append({"index": 2, "name": "tyre", "marker_1": 1, "marker_2": 2,
                                   "stiffness": [0.0, 0.0, K_TYRE, 0.0, 0.0, 0.0],
                                   "damping": [0.0, 0.0, C_TYRE, 0.0, 0.0, 0.0]})
    else:
        tables["test_road_tyres"] = [{"index": 1, "name": "tyre", "marker_1": 1, "marker_2": 2, "rate": K_TYRE,
                                      "damping": C_TYRE, "omega": OMEGA.tolist(), "cos": COS[:, 0].tolist(),
                                      "sin": SIN[:, 0].tolist()}]
        tables["element_groups"] = (ROAD_TYRE,)
    return build_model(tables)


def run(model, exc, solver, n=400):
    eq = statics.static_equilibrium(model, loads.u_at(loads.without_harmonics(exc), 0.0))
    assert bool(eq.converged)
    system = model_system(model, exc, solver=solver)
    tr = jax.jit(lambda r0: LSRT2.simulate(system, r0, jnp.zeros_like(r0), 0.0, 1e-3, n))(eq.r.reshape(-1))
    return np.asarray(eq.r), np.asarray(tr.outputs["r"])


def test_a_tyre_group_reading_the_road_equals_the_bushing_and_force_input_route(solver="block"):
    base = loads.excitation(np.zeros((2, 6)))
    left_only = RoadProfile(OMEGA, COS * [1.0, 0.0], SIN * [1.0, 0.0])
    omega, cos, sin = wheel_force_harmonics(left_only, K_TYRE, C_TYRE)
    builtin = rig_with("bushing")
    group = rig_with("group")
    assert [g.name for g in group.topology.element_groups][-1] == "test_road_tyre"
    r_eq_b, ref = run(builtin, loads.with_harmonics(base, omega, cos, sin), solver)
    r_eq_g, got = run(group, base, solver)
    np.testing.assert_allclose(r_eq_g, r_eq_b, rtol=0, atol=1e-12)      # the input at rest: the mean road
    z_ref, z_got = ref[:, 2], got[:, 2]
    motion = np.abs(z_ref - z_ref[0]).max()
    assert motion > 1e-3, motion                              # the road moves the wheel by millimetres
    np.testing.assert_allclose(z_got, z_ref, rtol=0, atol=1e-9 * motion)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-9 * np.abs(ref - ref[0]).max())


def test_a_group_that_reads_an_input_must_build_it():
    no_input = forces.ElementGroup("test_road_tyre_bad", "test_road_tyres", tyre_element, input=tyre_input,
                                   build=lambda rows, ends: {k: v for k, v in tyre_build(rows, ends).items()
                                                             if k != "input"})
    cfg = copy.deepcopy(load_model_cfg("toy_trailing_arm"))
    cfg["per_side"]["test_road_tyres"] = {
        "tyre": {"bodies": ["chassis", "wheel"], "at": "WC", "rate": K_TYRE, "damping": C_TYRE,
                 "omega": [1.0], "cos": [0.0], "sin": [0.0]}}
    with pytest.raises(ModelError, match="reads a time-varying input; its build must give an 'input' entry"):
        build_model(build_tables(cfg, source=None, groups=(no_input,)))


def test_the_time_responses_outputs_see_the_input_at_the_samples_time():
    """The driver's outputs (the cube's channels, e.g. a group's force) are
    computed with the group's input at each sample's time, not at rest."""
    from kernels import response
    group = rig_with("group")
    base = loads.excitation(np.zeros((2, 6)))
    opts = response.Options(method="lsrt2", n_samples=6, every=7, split_steps=False)
    drv = response.driver(opts, lambda m, r, v, r_eq: {"w": m.elements["test_road_tyre"]["input"]})
    p = response.Problem(group, base, 0.0, 1e-3)
    tr = jax.jit(lambda p: drv.run(p, drv.init(p).r))(p)
    t = np.arange(6) * 7e-3
    prm = group.elements["test_road_tyre"]
    want = np.stack([jax.vmap(lambda q: tyre_input(q, tt))(prm) for tt in t])       # (sample, element, 2)
    np.testing.assert_allclose(np.asarray(tr.outputs["w"]), want, rtol=1e-13, atol=1e-16)
    assert np.abs(want[1:, :, 0]).max() > 1e-3                  # not the input at rest


def test_an_input_of_another_shape_or_with_events_is_refused():
    cfg = copy.deepcopy(load_model_cfg("toy_trailing_arm"))
    cfg["per_side"]["test_road_tyres"] = {
        "tyre": {"bodies": ["chassis", "wheel"], "at": "WC", "rate": K_TYRE, "damping": C_TYRE,
                 "omega": [1.0], "cos": [0.0], "sin": [0.0]}}
    three = forces.ElementGroup("test_road_tyre_3", "test_road_tyres", tyre_element, build=tyre_build,
                                input=lambda prm, t: jnp.concatenate([tyre_input(prm, t), jnp.zeros(1)]))
    with pytest.raises(ModelError, match=r"input\(prm, t\) gives shape \(3,\) for one element, its built "
                                         r"'input' entry \(2,\)"):
        build_model(build_tables(cfg, source=None, groups=(three,)))
    evented = forces.ElementGroup("test_road_tyre_ev", "test_road_tyres", tyre_element, build=tyre_build,
                                  input=tyre_input, events=forces.P2P_EVENTS)
    with pytest.raises(ModelError, match="a group with an input cannot have state events"):
        build_model(build_tables(cfg, source=None, groups=(evented,)))
