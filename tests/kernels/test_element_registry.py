"""Force-element groups as a named registry (kernels.forces.ElementGroup).

A test-only element type - a linear torsion spring (and damper) between two
bodies - is defined in this file only, added to the double-wishbone axle
through its model YAML, and run end to end: tables and validation, the
topology and the block pattern, the generalised forces and their element
Jacobians (autodiff vs central differences), static equilibrium, LSRT2 steps
and a swept parameter. Oracles: central differences; the axle without the
element (k = c = 0); scipy's rotation of the equilibrium body poses (the
spring torque is k times the relative rotation angle); and an independent
implementation of the same law by the built-in bushing group (a bushing with
rotational stiffness and damping only: its torque Rm1 Jl^-T(theta) k theta =
Rm1 k theta, method.md section 1).

The group is added to the model's tables by the build
(``build_tables(..., groups=(TORSION,))``); there is no global registry for
it to leak into.
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
from sweep.axle.builder import build_tables
from tests.conftest import load_model_cfg, random_state

NAME = "test_torsion_spring"          # unique: defined in this file only
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


def torsion_output(prm, x1, x2):
    """Force (none) and torque Rm1 (k theta + c w_rel) [N m] on body 1, vehicle frame."""
    g1, _ = torsion_element(prm, x1, x2)
    return jnp.concatenate([g1[:3], mv(euler_to_matrix(x1[3:6]), g1[3:])])


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
                              validate=torsion_validate, output=torsion_output,
                              targets={"stiffness": ("k", None),      # a factor on k
                                       # k itself in value mode [N m/rad]
                                       "rate": forces.Target("k", value_key="k", value_units="N m/rad")})


@pytest.fixture(scope="module")
def torsion_group():
    return TORSION


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
    return build_tables(dw_cfg(), groups=(TORSION,))


@pytest.fixture(scope="module")
def tor_model(tor_tables):
    return build_model(tor_tables)


def slots(model, *names):
    return [model.topology.body_names.index(n) for n in names]


# ----------------------------------------------------------------------------- registry
def test_registry_holds_the_builtin_groups_and_refuses_clashes(torsion_group, tor_tables):
    reg = forces.ElementRegistry((TORSION,))
    assert reg.names()[:2] == ["bushing", "p2p"] and forces.BUILTIN.names() == ["bushing", "p2p"]
    assert reg["bushing"].table_key == "bushings" and reg["p2p"].table_key == "p2p"
    assert reg[NAME] is TORSION and reg.extra == (TORSION,) and NAME not in forces.BUILTIN
    assert reg.add(TORSION).groups == reg.groups                     # the same object again: one entry
    with pytest.raises(ValueError, match="already taken"):
        reg.add(forces.ElementGroup(NAME, "test_other_table", torsion_element, build=torsion_build))
    with pytest.raises(ValueError, match="table key"):
        reg.add(forces.ElementGroup("test_other", TABLE, torsion_element, build=torsion_build))
    with pytest.raises(ValueError, match="table key 'element_groups' is reserved"):
        reg.add(forces.ElementGroup("test_other", "element_groups", torsion_element, build=torsion_build))
    with pytest.raises(ValueError, match="already taken"):
        reg.add(forces.ElementGroup("tyre_contact", "test_tyres", torsion_element, build=torsion_build))
    with pytest.raises(ValueError, match="needs 'build'"):
        reg.add(forces.ElementGroup("test_nobuild", "test_nobuild", torsion_element))
    with pytest.raises(TypeError, match="is not a kernels.forces.ElementGroup"):
        reg.add("bushing")
    with pytest.raises(KeyError, match="no element group 'nope'"):
        reg["nope"]
    # a model's tables name their groups; copying the tables keeps the group itself
    assert tor_tables["element_groups"] == (TORSION,)
    assert copy.deepcopy(tor_tables)["element_groups"][0] is TORSION
    with pytest.raises(ModelError, match="element_groups: .*table key 'bushings'"):
        build_model({**tor_tables, "element_groups": (
            forces.ElementGroup("test_bad", "bushings", torsion_element, build=torsion_build),)})


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
    for g, k in (("bushing", "k"), ("bushing", "pos1"), ("p2p", "length")):
        np.testing.assert_array_equal(tor_model.elements[g][k], dw_model.elements[g][k])
    for f in ("mass", "r_design"):
        np.testing.assert_array_equal(getattr(tor_model, f), getattr(dw_model, f))
    assert topo != dw_model.topology and hash(topo) != hash(dw_model.topology)
    assert build_model(tor_tables).topology == topo          # structural equality
    # the group is part of the topology's identity: a different group object
    # with the same name and elements gives a different topology (no stale jit cache)
    twin = forces.ElementGroup(NAME, TABLE, torsion_element, build=torsion_build)
    assert build_model({**tor_tables, "element_groups": (twin,)}).topology != topo
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
        build_tables(cfg, groups=(TORSION,))


equilibrium = jax.jit(statics.static_equilibrium)


CHANNELS = ("wheel_centre_displacement", "toe", "camber")


def test_sweep_parameter_on_the_added_group(tor_model):
    from sweep.axle.params import build_parameters
    spec = {"twist": {"target": f"{NAME}.stiffness", "elements": "*_left", "bounds": [0.1, 10.0]},
            "bush": {"target": "bushing.stiffness", "elements": "upper_arm_*", "directions": "radial",
                     "bounds": [0.5, 2.0]}}
    pset = build_parameters(spec, tor_model)
    m = pset.apply(tor_model, jnp.array([3.0, 1.5]))
    np.testing.assert_array_equal(m.elements[NAME]["k"], [3.0 * K_TORSION, K_TORSION])
    np.testing.assert_array_equal(m.elements[NAME]["rot1"], tor_model.elements[NAME]["rot1"])
    assert float(m.elements["bushing"]["k_scale"][tor_model.topology.bushing_names.index("upper_arm_rear_left"), 0]) == 1.5
    assert m.topology == tor_model.topology
    # differentiable with respect to the parameter
    g = jax.grad(lambda th: jnp.sum(pset.apply(tor_model, th).elements[NAME]["k"]))(jnp.array([1.0, 1.0]))
    np.testing.assert_allclose(g, [K_TORSION, 0.0])
    from sweep.core.config import ConfigError
    with pytest.raises(ConfigError, match="matches no"):
        build_parameters({"t": {"target": f"{NAME}.stiffness", "elements": "nope", "bounds": [0.5, 2]}},
                         tor_model)
    # a value-mode target the group declares: k set in its units, and those units on the cube
    from sweep.engine.layout import parameter_units
    pv = build_parameters({"k": {"target": f"{NAME}.rate", "mode": "value", "elements": "*_right",
                                 "nominal": K_TORSION, "bounds": [100.0, 1000.0]}}, tor_model)
    np.testing.assert_array_equal(pv.apply(tor_model, jnp.array([250.0])).elements[NAME]["k"], [K_TORSION, 250.0])
    assert parameter_units(pv.params[0]) == "N m/rad" and parameter_units(pset.params[0]) == "1"
    with pytest.raises(ConfigError, match="mode = value is only for the targets .*rate"):
        build_parameters({"t": {"target": f"{NAME}.stiffness", "mode": "value", "nominal": 1.0,
                                "bounds": [0.5, 2]}}, tor_model)


def test_the_groups_output_is_its_element_force_and_equals_the_twin_bushings(torsion_group):
    """A group's ``output`` is what ``kernels.metrics.element_forces`` returns
    and the time response stores (``<group>_force``): at a random moving
    state, the torsion spring's torque on its first body equals that of the
    built-in bushing with the same rotational rates beside it (an
    independent law: the bushing's), force zero; a group without an output
    is refused by name."""
    model = build_model(build_tables(dw_cfg(both=(K_TORSION, C_TORSION)), groups=(TORSION,)))
    r, v = random_state(model, seed=3)
    f_t = np.asarray(metrics.element_forces(model, NAME, r, v))
    names = model.topology.bushing_names
    rows = [names.index("arm_twist_bushing_left"), names.index("arm_twist_bushing_right")]
    f_b = np.asarray(metrics.bushing_forces(model, r, v, rows=rows))
    assert f_t.shape == (2, 6) and np.abs(f_t[:, 3:]).max() > 1.0          # the spring is loaded
    np.testing.assert_allclose(f_t, f_b, rtol=0, atol=1e-9 * np.abs(f_b).max())
    np.testing.assert_array_equal(f_t[:, :3], 0.0)
    np.testing.assert_array_equal(metrics.element_forces(model, "bushing", r, v),
                                  metrics.bushing_forces(model, r, v))
    with pytest.raises(ValueError, match="no element group 'p2p' with an output"):
        metrics.element_forces(model, "p2p", r, v)
