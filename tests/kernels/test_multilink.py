"""The multi-link rear axle with subframe (configs/model/multilink.yaml):
counts and topology of method.md section 1, static equilibrium checked by an
independent force and moment balance, and the longitudinal step against the
Radau reference (method.md section 3)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import kernels  # noqa: F401  (float64)
from kernels import loads, metrics
from sweep.results.cube import pooled_signals
from tests.conftest import step_runs_against_radau

PUBLISHED = {"wheel_displacement": 0.01286, "bushing_force": 0.01545}  # method.md section 3
# NMSE (definition in test_nmse_against_radau_within_published) measured by
# that test (LSRT2 h = 1 ms, block solver, against Radau rtol 1e-6 / atol
# 1e-9 m, 1e-6 m/s) on configs/model/multilink.yaml with the static
# alignment and conservative bushing law, measured 2026-11-24:
# 1.78e-6 / 1.61e-6 (before: 1.8e-6 / 1.5e-6). The published bars are
# ~10,000x above; the regression bounds catch a degraded method or model.
# Re-measure (the test prints the value) after any change of the model or of
# the method, and update together with the reason in the commit.
MEASURED_NMSE = {"wheel_displacement": 1.8e-6, "bushing_force": 1.6e-6}
REGRESSION_FACTOR = 3.0     # value <= 3 x measured
FLOOR_FACTOR = 10.0         # value >  measured / 10: a test that compares nothing fails
LINKS = ("upper_front_link", "upper_rear_link", "lateral_link", "trailing_link", "tie_rod")


def _bodies_of(topo, name):
    i = topo.bushing_names.index(name)
    slot = lambda s: "chassis" if s == topo.n_bodies else topo.body_names[s]  # noqa: E731
    return slot(topo.bushing_bodies[i, 0]), slot(topo.bushing_bodies[i, 1])


def test_multilink_counts_and_topology(ml_model):
    topo = ml_model.topology
    assert (topo.n_bodies, topo.n_force_elements, topo.n_dof) == (27, 63, 162)
    assert (len(topo.bushing_names), len(topo.p2p_names)) == (55, 8)
    # the reference bushings join the longitudinal (trailing) link and the subframe
    assert topo.tables["reference_bushings"] == {"left": "trailing_link_subframe_left",
                                                 "right": "trailing_link_subframe_right"}
    for s in ("left", "right"):
        assert _bodies_of(topo, f"trailing_link_subframe_{s}") == (f"trailing_link_{s}", "subframe")
        # every link joins the subframe and the wheel carrier, none the body
        # (the spring link also carries the spring seat and the drop link)
        for link in LINKS:
            ends = {b for n in topo.bushing_names for b in _bodies_of(topo, n)
                    if f"{link}_{s}" in _bodies_of(topo, n)} - {f"{link}_{s}"}
            assert {"subframe", f"wheel_carrier_{s}"} <= ends and "chassis" not in ends, (link, ends)
    # the subframe is bushed to the body; only it, the damper rods and the
    # spring tops touch the body (carrier and links hang on the subframe)
    on_body = {b for n in topo.bushing_names if "chassis" in _bodies_of(topo, n)
               for b in _bodies_of(topo, n)} - {"chassis"}
    assert on_body == {"subframe", "piston_rod_left", "piston_rod_right",
                       "upper_spring_half_left", "upper_spring_half_right"}
    assert sum(_bodies_of(topo, n) == ("subframe", "chassis") for n in topo.bushing_names) == 4
    assert not np.any(topo.p2p_bodies == topo.n_bodies)  # no P2P element on the body
    # the anti-roll bar halves are coupled by one bushing, mounted on the subframe
    assert _bodies_of(topo, "anti_roll_bar_centre") == ("anti_roll_bar_half_left",
                                                        "anti_roll_bar_half_right")


def _rotation(euler):
    """z-y'-x'' Euler angles -> rotation matrix, by scipy (independent of kernels.rotations)."""
    return Rotation.from_euler("ZYX", np.asarray(euler)).as_matrix()


def test_static_equilibrium_force_and_moment_balance(ml_model, ml_equilibrium, step_excitation):
    """Free body of the whole axle in static equilibrium: the forces and moments
    the body (chassis) exerts through its bushings, plus weights and wheel loads,
    sum to zero. Bushing forces from the output channel (kernels' bushing_output,
    not the assembled q the solver zeroes); lever arms from scipy rotations."""
    model, eq = ml_model, ml_equilibrium
    topo = model.topology
    assert bool(eq.converged)
    r = np.asarray(eq.r)
    u = np.asarray(loads.u_at(step_excitation, 4.9))
    out = np.asarray(jax.jit(metrics.bushing_forces)(model, eq.r, jnp.zeros_like(eq.r)))   # jitted: op by op ~10 s
    pos1 = np.asarray(model.elements["bushing"]["pos1"])
    m = topo.n_bodies
    force, moment = np.zeros(3), np.zeros(3)   # of the body (chassis) on the axle, about the origin
    for i, (b1, b2) in enumerate(topo.bushing_bodies):
        if m not in (b1, b2):
            continue
        F, M = out[i, :3], out[i, 3:]          # on body 1, acting at marker 1
        at = r[b1, :3] + _rotation(r[b1, 3:]) @ pos1[i] if b1 != m else pos1[i]
        sign = 1.0 if b2 == m else -1.0        # reaction of the chassis on the axle
        force += sign * F
        moment += sign * (np.cross(at, F) + M)
    mass = np.asarray(model.mass)
    g = np.asarray(model.gravity)
    wc = r[topo.wheel_slots, :3]
    force_ext = mass.sum() * g + u[:, :3].sum(0)
    moment_ext = np.cross(r[:, :3], mass[:, None] * g).sum(0) + (np.cross(wc, u[:, :3]) + u[:, 3:]).sum(0)
    scale = np.linalg.norm(force_ext)
    np.testing.assert_allclose(force + force_ext, 0.0, atol=1e-6 * scale)
    np.testing.assert_allclose(moment + moment_ext, 0.0, atol=1e-6 * scale * 1.0)  # 1 m lever
    # the chassis reaction of the kernels' element groups agrees, and the
    # vertical balance is wheel loads minus the axle weight
    np.testing.assert_allclose(jax.jit(metrics.chassis_reaction)(model, eq.r, jnp.zeros_like(eq.r)),
                               -force, atol=1e-6 * scale)
    assert abs(-force[2] - (10000.0 - 9.81 * mass.sum())) < 1e-6 * scale


def test_equilibrium_is_symmetric_near_design_and_stops_are_clear(ml_model, ml_equilibrium):
    model, eq = ml_model, ml_equilibrium
    topo = model.topology
    r = np.asarray(eq.r)
    names = topo.body_names
    for i, n in enumerate(names):
        if n.endswith("_left"):
            j = names.index(n[:-5] + "_right")
            np.testing.assert_allclose(r[j] * [1, -1, 1, -1, 1, -1], r[i], atol=1e-9)
    # the spring preload puts the loaded wheel centre at the design ride height
    dz = r[topo.wheel_slots, 2] - np.asarray(model.r_design)[topo.wheel_slots, 2]
    assert np.all(np.abs(dz) < 2e-3), dz
    toe, camber = (np.degrees(np.asarray(a)) for a in metrics.toe_camber(model, eq.r))
    assert np.all(np.abs(toe) < 1.0) and np.all((camber < 0) & (camber > -3.0))
    # bump and rebound stops clear by at least 30 mm of travel
    tables = {e["name"]: e for e in topo.tables["p2p"]}
    for k, (name, kind) in enumerate(zip(topo.p2p_names, topo.p2p_kinds)):
        if kind not in ("bump_stop", "rebound_stop"):
            continue
        b1, b2 = topo.p2p_bodies[k]
        p1 = r[b1, :3] + _rotation(r[b1, 3:]) @ np.asarray(model.elements["p2p"]["pos1"][k])
        p2 = r[b2, :3] + _rotation(r[b2, 3:]) @ np.asarray(model.elements["p2p"]["pos2"][k])
        s = float(model.elements["p2p"]["length"][k]) - np.linalg.norm(p2 - p1)    # compression travel [m]
        travel = s if kind == "bump_stop" else -s
        assert travel < tables[name]["clearance"] - 0.03, (name, travel)


# --------------------------------------------------------------------------- validation


def test_bad_multilink_config_names_the_field(ml_cfg):
    import copy
    from kernels.model import ModelError
    from sweep.axle.builder import build_tables
    cfg = copy.deepcopy(ml_cfg)
    cfg["per_side"]["bushings"]["trailing_link_subframe"]["bodies"] = ["trailing_link", "subfame"]
    with pytest.raises(ModelError, match=r"model.bushings.trailing_link_subframe_left.bodies = 'subfame' is not a body "
                                         r"\(known: .*subframe, .*trailing_link.*; a per_side body is named without"):
        build_tables(cfg)
    cfg = copy.deepcopy(ml_cfg)
    cfg["reference_bushing"] = "trailing_link_body"
    with pytest.raises(ModelError, match=r"model.reference_bushing = 'trailing_link_body': no bushing"):
        build_tables(cfg)


def test_an_undefined_body_names_the_model_file_and_line(ml_cfg, tmp_path):
    """The model file read as a user's (sweep.axle.builder.load_model_file):
    the error names the file and the line of the key that names the body."""
    import yaml
    from kernels.model import ModelError
    from sweep.axle.builder import build_tables, load_model_file
    cfg = yaml.safe_load(yaml.safe_dump(ml_cfg))
    cfg["per_side"]["bushings"]["trailing_link_subframe"]["bodies"] = ["trailing_link", "subfame"]
    path = tmp_path / "my_axle.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    lines = path.read_text().splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.strip().startswith("trailing_link_subframe:"))
    line = at + 1 + next(i for i, ln in enumerate(lines[at:]) if ln.strip().startswith("bodies:"))
    with pytest.raises(ModelError, match=rf"is not a body \(known: .*\) \[{path}:{line}\]"):
        build_tables(load_model_file(path), source=str(path))

