"""Hardpoints as sweep variables (sweep.axle.params, target hardpoint): a
variant's offset moves the point before the model is built, so its values
equal - exactly - those of a model file with the point moved by hand (the
oracle: the hand-edited config, built the ordinary way), the geometry
really moves (body frames, rod inertias, marker positions, reference
lengths, the design position), the right side mirrors, and a bad
parameter is refused naming the field."""
import numpy as np
import pytest

from sweep.engine.values import Lifted, PerVariant
from sweep.axle.builder import model_from_config
from sweep.axle.params import build_parameters
from sweep.core.config import ConfigError
from tests.jobs import cfg_of


def build(*overrides):
    cfg = cfg_of(*overrides)
    return cfg, model_from_config(cfg.model)


def moved_by_hand(model_name, point, axis, d):
    """The model with ``point`` moved by ``d`` along ``axis``, written into its
    hardpoint table by hand."""
    cfg, _ = build(f"model={model_name}")
    p = [float(v) for v in cfg.model.hardpoints[point]]
    p["xyz".index(axis)] += d
    over = f"model.hardpoints.{point}=[{p[0]!r},{p[1]!r},{p[2]!r}]"
    return model_from_config(cfg_of(f"model={model_name}", over).model)


def per_variant(model_name, spec):
    cfg, model = build(f"model={model_name}")
    pset = build_parameters({"h": spec}, model)
    return PerVariant(cfg.model, pset, lambda m: m, Lifted(model)), model


@pytest.mark.parametrize("model_name,point,axis", [("toy_trailing_arm", "PR", "z"),
                                                   ("toy_trailing_arm", "SA", "x"),
                                                   ("double_wishbone", "Q", "z"),
                                                   ("double_wishbone", "U1", "y")])
def test_an_offset_equals_the_point_moved_by_hand(model_name, point, axis):
    d = 0.0071
    pv, nominal = per_variant(model_name, {"target": "hardpoint", "points": [point], "axis": axis,
                                           "bounds": [-0.01, 0.01]})
    got = pv(np.array([[d]]))[0]
    want = Lifted(moved_by_hand(model_name, point, axis, d)).vector
    np.testing.assert_array_equal(got, want)
    assert not np.array_equal(got, Lifted(nominal).vector)


def test_the_geometry_really_moves_and_the_right_side_mirrors():
    """PR is an end of the arm's rods: the arm's frame (centre of mass),
    its inertia, the rear bushing's markers on it and the design position
    move; y offsets mirror on the right."""
    d = 0.008
    pv, nominal = per_variant("toy_trailing_arm", {"target": "hardpoint", "points": ["PR"], "axis": "y",
                                                   "bounds": [-0.01, 0.01]})
    moved = Lifted(nominal).rebuild(pv(np.array([[d]]))[0])
    names = list(nominal.topology.body_names)
    arm_l, arm_r = names.index("arm_left"), names.index("arm_right")
    r0, r1 = np.asarray(nominal.r_design), np.asarray(moved.r_design)
    dy_l, dy_r = r1[arm_l, 1] - r0[arm_l, 1], r1[arm_r, 1] - r0[arm_r, 1]
    assert dy_l > 1e-4 and dy_r == pytest.approx(-dy_l, rel=1e-12)
    assert not np.allclose(np.asarray(moved.inertia)[arm_l], np.asarray(nominal.inertia)[arm_l])
    b = list(nominal.topology.bushing_names).index("rear_mount_left")
    assert not np.allclose(np.asarray(moved.elements["bushing"]["pos1"])[b], np.asarray(nominal.elements["bushing"]["pos1"])[b])
    # one side only: the other side's arm stays where it was
    pv_l, _ = per_variant("toy_trailing_arm", {"target": "hardpoint", "points": ["PR"], "axis": "y",
                                               "side": "left", "bounds": [-0.01, 0.01]})
    left_only = Lifted(nominal).rebuild(pv_l(np.array([[d]]))[0])
    r2 = np.asarray(left_only.r_design)
    assert r2[arm_l, 1] == r1[arm_l, 1] and r2[arm_r, 1] == r0[arm_r, 1]


def test_a_reference_length_follows_a_moved_spring_seat():
    pv, nominal = per_variant("toy_trailing_arm", {"target": "hardpoint", "points": ["SC"], "axis": "z",
                                                   "bounds": [-0.02, 0.02]})
    moved = Lifted(nominal).rebuild(pv(np.array([[0.015]]))[0])
    k = list(nominal.topology.p2p_names).index("spring_left")
    assert float(moved.elements["p2p"]["length"][k] - nominal.elements["p2p"]["length"][k]) == pytest.approx(0.015, rel=0.05)


@pytest.mark.parametrize("spec,match", [
    ({"points": ["NOPE"], "axis": "z", "bounds": [-0.01, 0.01]}, r"points: 'NOPE' matches no hardpoint .*known: DA"),
    ({"points": ["PR"], "axis": "w", "bounds": [-0.01, 0.01]}, r"axis = 'w' must be x, y or z"),
    ({"points": ["PR"], "axis": "z", "bounds": [-10, 10]}, r"bounds = \[-10.0, 10.0\]: offsets are in metres"),
    ({"points": ["PR"], "axis": "z"}, r"bounds is missing"),
    ({"axis": "z", "bounds": [-0.01, 0.01]}, r"points is missing"),
    ({"points": ["PR"], "axis": "z", "side": "up", "bounds": [-0.01, 0.01]}, r"side = 'up' must be both, left or right"),
    ({"points": ["PR"], "axis": "z", "bounds": [-0.01, 0.01], "scale": "log"}, r"linear scale"),
    ({"points": ["PR"], "axis": "z", "bounds": [-0.01, 0.01], "elements": "x"}, r"h.elements: unknown key"),
    ({"points": ["PR"], "axis": "z", "bounds": [-0.01, 0.01], "alignment": "yes"}, r"alignment = 'yes' must be hold"),
    ({"points": ["PR"], "axis": "z", "side": "left", "bounds": [-0.01, 0.01], "alignment": "realign"},
     r"alignment = realign needs side: both"),
])
def test_a_bad_hardpoint_parameter_is_refused_naming_the_field(spec, match):
    _, model = build("model=toy_trailing_arm")
    with pytest.raises(ConfigError, match=match):
        build_parameters({"h": {"target": "hardpoint", **spec}}, model)


def test_realign_needs_the_models_alignment_targets():
    """The toy axle states no alignment: a re-aligning hardpoint design is
    refused before anything runs, naming the missing section."""
    cfg, model = build("model=toy_trailing_arm")
    pset = build_parameters({"h": {"target": "hardpoint", "points": ["PR"], "axis": "z", "bounds": [-0.01, 0.01],
                                   "alignment": "realign"}}, model)
    assert pset.realign
    with pytest.raises(ConfigError, match=r"model\.alignment: the model states no alignment targets"):
        PerVariant(cfg.model, pset, lambda m: m, Lifted(model))


def test_a_point_defined_along_others_is_refused():
    over = "+model.hardpoints.MID={along: [PF, PR], fraction: 0.5}"
    cfg, model = build("model=toy_trailing_arm", over)
    with pytest.raises(ConfigError, match=r"'MID' is defined through other points"):
        build_parameters({"h": {"target": "hardpoint", "points": ["MID"], "axis": "z",
                                "bounds": [-0.01, 0.01]}}, model)


def test_the_parameter_does_not_touch_the_characteristics():
    """apply() leaves a hardpoint parameter alone (it acts at the build):
    the model it returns is the nominal one for any offset."""
    import jax.numpy as jnp
    _, model = build("model=toy_trailing_arm")
    pset = build_parameters({"h": {"target": "hardpoint", "points": ["PR"], "axis": "z",
                                   "bounds": [-0.01, 0.01]}}, model)
    out = pset.apply(model, jnp.array([0.009]))
    np.testing.assert_array_equal(Lifted(out).vector, Lifted(model).vector)
    assert pset.hardpoint_offsets([0.009])[0][0] == "PR"
