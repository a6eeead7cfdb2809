"""Model-file features of sweep/axle/builder.py used by the leaf-spring
axle: hardpoints given as point specs, x_hint as an axis spec, per-side
bushing preload mirrored onto the right side, and the `alignment.pretension`
names checked."""
import copy

import jax.numpy as jnp
import numpy as np
import pytest

import kernels  # noqa: F401  (float64)
from tests.conftest import load_model_cfg
from kernels import statics
from kernels.model import ModelError, build_model
from sweep.axle.builder import build_tables


def _row(tables, key, name):
    return next(r for r in tables[key] if r["name"] == name)


def test_hardpoint_as_point_spec_and_x_hint_as_axis_spec():
    cfg = load_model_cfg("toy_trailing_arm")
    cfg["hardpoints"]["MID"] = {"along": ["PF", "PR"], "fraction": 0.25}
    cfg["per_side"]["bushings"]["pivot_front"]["at"] = "MID"
    cfg["per_side"]["bushings"]["pivot_front"]["x_hint"] = {"along": ["PF", "PR"]}
    t = build_tables(cfg)
    pf, pr = np.array([0.45, 0.55, 0.0]), np.array([0.05, 0.40, -0.02])
    mid = pf + 0.25 * (pr - pf)
    for side, S in (("left", np.ones(3)), ("right", np.array([1.0, -1.0, 1.0]))):
        row = _row(t, "bushings", f"pivot_front_{side}")
        m = t["markers"][row["marker_1"] - 1]
        R = np.asarray(m["orientation"])
        assert np.allclose(m["position"], S * mid)            # vehicle frame at build time
        x = R[:, 0]
        d = S * (pr - pf)
        d = d - (d @ R[:, 2]) * R[:, 2]
        assert np.allclose(x, d / np.linalg.norm(d), atol=1e-12)      # x along PF -> PR (mirrored)
    cfg["hardpoints"]["LOOP"] = {"along": ["LOOP", "PR"], "fraction": 0.5}
    cfg["per_side"]["bushings"]["pivot_front"]["at"] = "LOOP"
    with pytest.raises(ModelError, match="model.hardpoints.LOOP: defined through itself"):
        build_tables(cfg)


PRELOAD = [300.0, -200.0, 150.0, 20.0, -15.0, 10.0]


def _preloaded_toy():
    cfg = load_model_cfg("toy_trailing_arm")
    cfg["per_side"]["bushings"]["pivot_front"]["preload"] = PRELOAD
    cfg["per_side"]["bushings"]["pivot_front"]["offset"] = [0.001, 0.002, 0.0, 0.0, 0.01, 0.02]
    return build_tables(cfg)


def test_per_side_preload_and_offset_are_mirrored():
    """A per-side bushing preload (x, y, z, rx, ry, rz) is given for the left
    side; the right side's frame (frame_from_axis of the mirrored axes) has
    its local y reversed, so the mirror image is (x, -y, z, -rx, ry, -rz),
    the same for the offset."""
    t = _preloaded_toy()
    left, right = _row(t, "bushings", "pivot_front_left"), _row(t, "bushings", "pivot_front_right")
    flip = np.array([1, -1, 1, -1, 1, -1])
    assert left["preload"] == PRELOAD
    assert np.allclose(right["preload"], np.array(PRELOAD) * flip)
    assert np.allclose(right["offset"], np.array(left["offset"]) * flip)
    R = [np.asarray(t["markers"][r["marker_1"] - 1]["orientation"]) for r in (left, right)]
    assert np.allclose(R[1], np.diag([1, -1, 1]) @ R[0] @ np.diag([1, -1, 1]))    # local y reversed


def test_pretension_names_are_checked():
    cfg = load_model_cfg("leaf_spring_axle")
    bad = copy.deepcopy(cfg)
    bad["alignment"]["pretension"]["front_eyes"] = ["x"]
    with pytest.raises(ModelError, match="model.alignment.pretension.front_eyes: no per-side bushing"):
        build_tables(bad)
    bad = copy.deepcopy(cfg)
    bad["alignment"]["pretension"]["front_eye"] = ["x", "q"]
    with pytest.raises(ModelError, match=r"model.alignment.pretension.front_eye = \['x', 'q'\] must list directions"):
        build_tables(bad)


def test_a_model_in_millimetres_is_refused_with_a_hint():
    """Every length of the double wishbone in mm (hardpoints, centres of
    mass, stop clearances x 1000): refused before any solver runs, naming a
    point, its distance from the wheel centres and the likely unit mistake;
    so is one stop clearance given in mm (70 for 0.070 m)."""
    import copy
    from kernels.model import ModelError
    cfg = load_model_cfg("double_wishbone")

    def scaled(v):
        if isinstance(v, list) and all(isinstance(x, (int, float)) for x in v):
            return [1000.0 * x for x in v]
        return v
    mm = copy.deepcopy(cfg)
    mm["hardpoints"] = {k: scaled(v) for k, v in mm["hardpoints"].items()}
    with pytest.raises(ModelError, match=r"lies [0-9.]+ m from the nearer wheel centre .* are these millimetres\?"):
        build_tables(mm)
    stop = copy.deepcopy(cfg)
    stop["per_side"]["p2p"]["bump_stop"]["clearance"] = 70
    with pytest.raises(ModelError, match=r"model.p2p.bump_stop_left.clearance = 70.* is this millimetres\?"):
        build_tables(stop)


@pytest.mark.parametrize("spec, tyres, words", [
    ({"mass_per_wheel": 0.42}, True, "tonnes"),
    ({"mass_per_wheel": 4.2e5}, True, "tonnes or grams"),
    ({"mass_per_wheel": "heavy"}, True, "not a number"),
    ({"mass": 420.0}, True, "mass_per_wheel"),
    ({"mass_per_wheel": 420.0}, False, "stands on the tyres"),
])
def test_a_bad_sprung_body_is_refused(spec, tyres, words):
    """A sprung mass per wheel outside 50-5000 kg (a likely unit mistake), a
    wrong key, or a sprung body without tyres (it would float) is one
    error naming model.sprung_body."""
    cfg = load_model_cfg("toy_trailing_arm")
    cfg["sprung_body"] = spec
    if tyres:
        cfg["tyres"] = {"rate": 250e3, "damping": 100.0}
    with pytest.raises(ModelError, match="model.sprung_body") as err:
        build_tables(cfg)
    assert words in str(err.value)


def test_the_sprung_body_carries_the_chassis_mounts_and_is_no_sweep_target():
    """Every element end on the chassis moves onto the sprung body (mass 2 m,
    roll inertia 2 m s^2 at the middle of the wheel centres); the tyres' and
    the guide's ground ends stay; a sweep pattern skips the guide, and a
    pattern matching only the rig is an error."""
    from sweep.axle.params import build_parameters
    from sweep.core.config import ConfigError
    cfg = load_model_cfg("toy_trailing_arm")
    cfg.update(tyres={"rate": 250e3, "damping": 100.0}, sprung_body={"mass_per_wheel": 420.0})
    t = build_tables(cfg)
    body = _row(t, "bodies", "sprung_body")
    assert body["mass"] == 840.0
    assert body["inertia"][0][0] == pytest.approx(840.0 * 0.75 ** 2)
    np.testing.assert_allclose(body["position"], [0.0, 0.0, 0.0])
    on_ground = {mk["name"] for mk in t["markers"] if mk["body"] == 0}
    assert on_ground == {"sprung_body_guide/1", "tyre_left/1", "tyre_right/1"}
    model = build_model(t)
    pset = build_parameters({"k": {"target": "bushing.stiffness", "elements": "*", "bounds": [0.5, 2.0]}}, model)
    rows = set(np.asarray(pset.params[0].index[0]).ravel().tolist())
    names = model.topology.bushing_names
    assert {names[i] for i in rows} == {n for n in names if n not in ("sprung_body_guide", "tyre_left", "tyre_right")}
    with pytest.raises(ConfigError, match="sprung_body_guide"):
        build_parameters({"g": {"target": "bushing.stiffness", "elements": "sprung_*", "bounds": [0.5, 2.0]}},
                         model)
