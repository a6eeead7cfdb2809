"""A model file whose keys are known but whose meaning would be lost or
twisted is refused with the reason (sweep/axle/builder.py, kernels/model.py):
a key the element's kind does not use, a body given two ways, a flexible
body per side, a seat offset on something that is not a spring; and what
used to be refused without need is accepted (a travel lock beside a steering
rack, a loss factor per direction). Oracle: the toy and double-wishbone
files, each changed in one place."""
import copy
import math

import numpy as np
import pytest

from kernels.model import ModelError, build_model
from sweep.axle.builder import build_tables
from tests.conftest import load_model_cfg


@pytest.fixture
def toy():
    return copy.deepcopy(load_model_cfg("toy_trailing_arm"))


def _refused(cfg, match):
    with pytest.raises(ModelError, match=match):
        build_model(build_tables(cfg))


@pytest.mark.parametrize("kind, key, value", [
    ("bump_stop", "damping", 500.0), ("rebound_stop", "preload", 100.0), ("bump_stop", "stiffness", 1e5),
    ("bump_stop", "seat_offset", 0.01), ("damper", "stiffness", 1e4), ("damper", "clearance", 0.05),
    ("damper", "seat_offset", 0.01), ("spring", "clearance", 0.05)])
def test_a_p2p_key_its_kind_does_not_use_is_refused(toy, kind, key, value):
    p2p = toy["per_side"]["p2p"]
    if kind.endswith("stop"):
        p2p["stop"] = {"bodies": ["arm", "chassis"], "from": "SA", "to": "SC", "kind": kind, "clearance": 0.05,
                       "curve": {"x": [0.0, 0.01], "y": [0.0, 1000.0]}, key: value}
    else:
        p2p[kind][key] = value
    _refused(toy, rf"\.{key}: a {kind} has no {key} \(")


def test_a_zero_length_and_a_damper_curve_off_the_origin_are_refused(toy):
    bad = copy.deepcopy(toy)
    bad["per_side"]["p2p"]["spring"]["length"] = 0.0
    _refused(bad, r"'spring_left'\.length = 0\.0 must be > 0")
    bad = copy.deepcopy(toy)
    del bad["per_side"]["p2p"]["damper"]["damping"]
    bad["per_side"]["p2p"]["damper"]["curve"] = {"x": [-1.0, 0.0, 1.0], "y": [-2000.0, 50.0, 2000.0]}
    _refused(bad, r"'damper_left'\.curve must pass through \(0, 0\)")
    ok = copy.deepcopy(bad)
    ok["per_side"]["p2p"]["damper"]["curve"]["y"][1] = 0.0
    build_model(build_tables(ok))


def test_a_body_is_given_by_rods_or_by_com_and_inertia(toy):
    for extra in ({"inertia": [0.1, 0.1, 0.1]}, {"com": "WC"}):
        bad = copy.deepcopy(toy)
        bad["per_side"]["bodies"]["arm"].update(extra)
        _refused(bad, r"model\.bodies\.arm_left: give either 'rods' .* beside rods")
    bad = copy.deepcopy(toy)
    del bad["per_side"]["bodies"]["wheel"]["inertia"]
    _refused(bad, r"model\.bodies\.wheel_left: missing 'inertia'")


def test_a_flexible_body_per_side_is_refused(toy):
    toy["per_side"]["flexible_bodies"] = {"beam": {"damping_ratio": 0.02}}
    _refused(toy, r"per_side\.flexible_bodies: a flexible body is built once, under `shared")


def test_the_seat_offset_belongs_to_a_spring(toy):
    toy["alignment"] = {"wheel_load": 4000.0, "seat_offset_of": "damper"}
    _refused(toy, r"seat_offset_of = 'damper' is a 'damper', not a spring")


def test_a_shared_element_names_per_side_bodies_with_their_suffix(toy):
    toy["shared"] = {"bushings": {"cross": {"bodies": ["arm", "chassis"], "at": "PR", "type": "rear_bushing"}}}
    with pytest.raises(ModelError) as err:
        build_tables(toy)
    msg = str(err.value)
    assert "'arm' is not a body" in msg and "arm_left" in msg and "with its _left / _right" in msg


def test_a_travel_lock_beside_a_steering_rack_needs_no_steering_joint():
    cfg = copy.deepcopy(load_model_cfg("double_wishbone"))
    del cfg["steering_joint"]
    _refused(copy.deepcopy(cfg), r"travel_lock = 'lower_link' needs model\.steering_joint or an enabled")
    cfg["steering_rack"]["enabled"] = True
    tables = build_tables(cfg)
    assert tables["travel_lock"] == {"left": "lower_link_left", "right": "lower_link_right"}


def test_a_loss_factor_per_direction(toy):
    eta = [0.05, 0.10, 0.0, 0.2, 0.2, 0.01]
    toy["bushing_types"]["pivot_bushing"]["loss_factor"] = eta
    row = next(b for b in build_tables(toy)["bushings"] if b["name"] == "pivot_front_left")
    k = np.asarray(toy["bushing_types"]["pivot_bushing"]["stiffness"])
    np.testing.assert_allclose(row["damping"], np.asarray(eta) * k / (2 * math.pi * 10.0), rtol=1e-12)
    toy["bushing_types"]["pivot_bushing"]["loss_factor"] = [0.05] * 5
    _refused(toy, r"pivot_front_left\.loss_factor = .* must be one number or six")


def test_a_per_side_element_naming_a_suffixed_body_is_refused(toy):
    """``wheel_left`` in a per-side element would tie the right side's copy to
    the left wheel; it is refused, naming the body to write instead."""
    toy["per_side"]["bushings"]["wheel_bearing"]["bodies"] = ["arm", "wheel_left"]
    _refused(toy, r"'wheel_left': a per_side element names a per_side body without its _left / _right \('wheel'\)")


def test_a_bushing_curve_passes_through_the_origin(toy):
    curve = {"x": [-0.01, 0.0, 0.01], "y": [-9000.0, 0.0, 9000.0]}
    ok = copy.deepcopy(toy)
    ok["bushing_types"]["pivot_bushing"]["stiffness_curves"] = {"x": curve}
    build_model(build_tables(ok))
    bad = copy.deepcopy(toy)
    bad["bushing_types"]["pivot_bushing"]["stiffness_curves"] = {"x": dict(curve, y=[-8000.0, 1000.0, 10000.0])}
    _refused(bad, r"stiffness_curves\.x must pass through \(0, 0\)")
