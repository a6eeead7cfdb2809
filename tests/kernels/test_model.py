"""Model tables: validation, the double-wishbone axle, static equilibrium."""
import copy

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import kernels  # noqa: F401
from kernels import loads, metrics
from kernels.model import ModelError, build_model
from sweep.axle.builder import build_tables
from tests.conftest import load_model_cfg


def test_double_wishbone_counts(dw_model):
    topo = dw_model.topology
    assert (topo.n_bodies, topo.n_force_elements, topo.n_dof) == (24, 55, 144)
    assert topo.tables["reference_bushings"] == {"left": "longitudinal_link_body_left",
                                                 "right": "longitudinal_link_body_right"}
    # the reference bushing joins the longitudinal link and the body (chassis)
    i = topo.bushing_names.index("longitudinal_link_body_left")
    assert topo.body_names[topo.bushing_bodies[i, 0]] == "longitudinal_link_left"
    assert topo.bushing_bodies[i, 1] == topo.n_bodies  # ground slot


def test_tables_are_exportable_plain_data(dw_tables):
    import json
    text = json.dumps(dw_tables)
    assert "wheel_carrier_left" in text and "main_spring_right" in text


def _bad(mutate):
    tables = copy.deepcopy(build_tables(load_model_cfg()))
    mutate(tables)
    return tables


@pytest.mark.parametrize("mutate, message", [
    (lambda t: t["bodies"][3].update(mass=-1.0), r"bodies\[3\] 'lower_link_left'.mass = -1.0"),
    (lambda t: t["bodies"][0].update(inertia=[[1, 0, 0], [0, -1, 0], [0, 0, 1]]), r"inertia .* not positive definite"),
    (lambda t: t["bodies"][1].update(index=t["bodies"][0]["index"]), r"bodies\[1\] .*index = 1 duplicates bodies\[0\]"),
    (lambda t: t["markers"][4].update(body=999), r"markers\[4\] .*body = 999 is not a body index"),
    (lambda t: t["bushings"][2].update(marker_2=12345), r"bushings\[2\] .*marker_2 = 12345 is not a marker index"),
    (lambda t: t["p2p"][0].update(curve={"x": [0.0, 0.02, 0.01], "y": [0, 1, 2]}),
     r"p2p\[0\] 'main_spring_left'.curve.x is not strictly increasing: x\[1\] = 0.02 >= x\[2\] = 0.01"),
    (lambda t: t["bushings"][0].update(stiffness=[1, 2, float("nan"), 4, 5, 6]), r"bushings\[0\].*stiffness .* not finite"),
    (lambda t: t["bushings"][0].update(stiffness_curves={"twist": {"x": [0, 1], "y": [0, 1]}}), r"unknown direction 'twist'"),
    (lambda t: t["p2p"][1].update(kind="magic"), r"p2p\[1\] 'damper_left'.kind = 'magic'"),
    (lambda t: t.update(wheels={"left": 77, "right": 1}), r"wheels.left = 77 is not a body index"),
])
def test_validation_names_field_and_value(mutate, message):
    with pytest.raises(ModelError, match=message):
        build_model(_bad(mutate))


def test_builder_errors_name_the_config_field():
    cfg = load_model_cfg()
    cfg["per_side"]["bushings"]["upper_ball_joint"]["at"] = "U9"
    with pytest.raises(ModelError, match=r"model.bushings.upper_ball_joint_left.at = 'U9' is not a hardpoint"):
        build_tables(cfg)
    cfg = load_model_cfg()
    cfg["stifness"] = 1
    with pytest.raises(ModelError, match=r"model.stifness: unknown key \(known: alignment, bushing_types"):
        build_tables(cfg)
    cfg = load_model_cfg()
    cfg["per_side"]["bushings"]["damper_eye"]["type"] = "bogus"
    with pytest.raises(ModelError, match=r"damper_eye_left.type = 'bogus' is not a bushing type"):
        build_tables(cfg)


def test_static_equilibrium_force_balance(dw_model, dw_equilibrium, step_excitation):
    """Sum of forces on the chassis = wheel loads + weight of all bodies (1e-6 rel)."""
    model, eq = dw_model, dw_equilibrium
    assert bool(eq.converged)
    u = loads.u_at(step_excitation, 4.9)
    on_chassis = jax.jit(metrics.chassis_reaction)(model, eq.r, jnp.zeros_like(eq.r))   # jitted: op by op ~10 s
    weight = jnp.sum(model.mass) * model.gravity
    expected = jnp.sum(u[:, :3], 0) + weight
    np.testing.assert_allclose(on_chassis, expected, rtol=0,
                               atol=1e-6 * float(jnp.linalg.norm(expected)))
    assert abs(float(expected[2]) - (10000 - 9.81 * float(jnp.sum(model.mass)))) < 1e-6


def test_equilibrium_is_mirror_symmetric_and_near_design(dw_model, dw_equilibrium):
    r = np.asarray(dw_equilibrium.r)
    names = dw_model.topology.body_names
    for i, n in enumerate(names):
        if n.endswith("_left"):
            j = names.index(n[:-5] + "_right")
            np.testing.assert_allclose(r[j] * [1, -1, 1, -1, 1, -1], r[i], atol=1e-9)
    toe, camber = metrics.toe_camber(dw_model, jnp.asarray(r))
    assert np.all(np.abs(np.degrees(np.asarray(toe))) < 1.0)
    assert np.all(np.abs(np.degrees(np.asarray(camber))) < 2.0)
    # design camber 0.8 deg (top out) on both sides, zero toe
    t0, c0 = metrics.toe_camber(dw_model, dw_model.r_design)
    np.testing.assert_allclose(np.degrees(np.asarray(c0)), [0.8, 0.8], atol=1e-3)
    np.testing.assert_allclose(np.asarray(t0), [0, 0], atol=1e-12)


def test_equilibrium_failure_is_reported_not_raised(dw_model, dw_equilibrium):
    """An equilibrium that cannot be found (a wheel load of 10^9 N: the Newton
    steps are bounded, so the iteration walks and runs out of iterations)
    comes back with converged = False after max_iter iterations, not as an
    exception - with the program compiled for dw_equilibrium (a second
    compilation of the double wishbone's Newton solver took 24 s)."""
    from kernels.statics import equilibrium
    u = jnp.zeros((2, 6)).at[:, 2].set(1e9)
    eq = equilibrium(dw_model, u)
    assert not bool(eq.converged) and int(eq.iterations) == 60
    assert bool(dw_equilibrium.converged)


def test_builtin_element_groups_and_shared_names(dw_model):
    """The built-in groups are in every registry and every topology; a model
    without added groups carries none (kernels.forces.ElementRegistry); the
    direction names are the shared ones (kernels.names)."""
    from kernels import forces, model, names
    topo = dw_model.topology
    assert topo.element_groups == (forces.BUILTIN["bushing"], forces.BUILTIN["p2p"]) == forces.BUILTIN.groups
    assert topo.extra_groups == () and list(topo.group_bodies) == ["bushing", "p2p"]
    # every group's parameters are in the element tables, with the keys its table declares
    assert list(dw_model.elements) == ["bushing", "p2p"]
    assert set(dw_model.elements["bushing"]) == set(forces.BUSHING_PARAMS)
    assert set(dw_model.elements["p2p"]) == set(forces.P2P_PARAMS)
    np.testing.assert_array_equal(topo.element_bodies,
                                  np.concatenate([topo.bushing_bodies, topo.p2p_bodies]))
    assert topo.n_force_elements == len(topo.bushing_names) + len(topo.p2p_names)
    assert model.DIRECTIONS is names.DIRECTIONS
