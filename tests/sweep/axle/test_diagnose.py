"""A model that is physically wrong says why (sweep.axle.diagnose, kernels.kc's
plausibility of a static state, sweep.align's proposals).

Oracles: a direction released by hand (the wheel bearing's spin rate set
to 0: the wheel is free to spin about its axle, nothing else) must be the
one named; a state moved by hand beyond a limit must be flagged and one
inside it not; a spring made 1000 times too soft must make the alignment
refuse its absurd seat offset, the nominal spring not."""
import copy
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import kernels  # noqa: F401  (float64)
from kernels import kc
from kernels.model import ModelError
from sweep.axle.builder import model_from_config
from tests.jobs import cfg_of


def toy(*overrides):
    return model_from_config(cfg_of("model=toy_trailing_arm", *overrides).model)


FREE_SPIN = "model.bushing_types.wheel_bearing.stiffness=[2.0e+8,2.0e+8,1.0e+8,5.0e+4,5.0e+4,0.0]"


def test_a_released_direction_is_named_with_its_bodies():
    from sweep.axle.diagnose import explain_unrestrained, unrestrained
    assert unrestrained(toy()) == []
    found = unrestrained(toy(FREE_SPIN))
    assert len(found) == 2                         # one free spin per wheel, nothing else
    named = sorted(bodies[0][0] for _, bodies in found)
    assert named == ["wheel_left", "wheel_right"]
    for f, bodies in found:
        assert f < 1e-3 and len(bodies) == 1 and bodies[0][2] in ("rotation about y", "rotation about -y")
    assert "wheel_left rotation about" in " ".join(explain_unrestrained(found))


def test_largest_residual_names_body_and_direction():
    from sweep.axle.diagnose import largest_residual
    model = toy()
    r = model.r_design
    body, direction, value = largest_residual(model, r, jnp.zeros((2, 6)).at[:, 2].set(1e6))
    assert direction == "fz" and body.startswith("wheel") and abs(value) > 5e5


def test_plausibility_of_a_static_state():
    model = toy()
    lim = kc.StaticLimits()
    r0 = model.r_design
    ok = jax.jit(lambda r: kc.static_state_plausible(model, r, lim))
    held = jax.jit(lambda r: kc.static_state_plausible(model, r, lim, held=True))
    assert bool(ok(r0))
    ws = np.asarray(model.topology.wheel_slots)
    low = r0.at[ws, 2].add(-0.15)                    # wheel centres 150 mm below design
    assert not bool(ok(low)) and bool(held(low))     # the rig holds the heights: not checked there
    assert bool(ok(r0.at[ws, 2].add(-0.05)))         # 50 mm: within the 0.1 m limit
    toe = r0.at[ws[0], 3].add(math.radians(15.0))    # left wheel steered 15 deg about z
    assert not bool(ok(toe)) and not bool(held(toe))
    assert bool(ok(r0.at[ws[0], 3].add(math.radians(5.0))))


def test_a_stop_engaged_at_rest_is_implausible_unless_allowed():
    model = model_from_config(cfg_of().model)       # the double wishbone: bump and rebound stops
    r0 = model.r_design
    _, _, _, pen0 = kc.static_state_measures(model, r0)
    assert float(pen0) == 0.0
    kinds = model.topology.p2p_kinds
    assert any("stop" in k for k in kinds)
    # the left damper tube pushed 70 mm up the piston rod: the bump stop
    # (60 mm clear at design) closes by ~10 mm
    names = model.topology.body_names
    up = r0.at[names.index("damper_tube_left"), 2].add(0.07)
    _, _, _, pen = kc.static_state_measures(model, up)
    assert float(pen) > 1e-3
    assert not bool(kc.static_state_plausible(model, up, kc.StaticLimits(), held=True))
    allowed = kc.StaticLimits(stop_penetration=None)
    assert bool(kc.static_state_plausible(model, up, allowed, held=True))


@pytest.fixture(scope="module")
def toy_alignment():
    from sweep.align import load_model_config
    cfg = load_model_config("toy_trailing_arm")
    cfg["alignment"] = {"wheel_load": 3500.0, "seat_offset_of": "spring"}
    return cfg


def test_alignment_refuses_a_seat_offset_longer_than_the_spring(toy_alignment):
    from sweep.align import align, check_proposal
    x, res = align(toy_alignment, log=lambda s: None)
    check_proposal(toy_alignment, x)                 # the toy's spring holds its load: a few mm
    assert abs(x[0]) < 0.05 and abs(res[0]) < 0.1
    soft = copy.deepcopy(toy_alignment)
    soft["per_side"]["p2p"]["spring"]["stiffness"] = 30.0     # N/m: a rate in N/mm read as N/m
    x, _ = align(soft, log=lambda s: None)
    with pytest.raises(ModelError, match=r"model\.per_side\.p2p\.spring: the alignment needs a seat offset of "
                                         r"\d+\.\d+ m .* longer than the spring itself .*N/mm"):
        check_proposal(soft, x)


def test_alignment_that_cannot_converge_names_the_free_direction(toy_alignment):
    from sweep.align import design_alignment
    free = copy.deepcopy(toy_alignment)
    free["bushing_types"]["wheel_bearing"]["stiffness"][5] = 0.0
    with pytest.raises(ModelError, match=r"did not converge; held by no element .*wheel_(left|right) rotation about"):
        design_alignment(free)


def test_the_jobs_checks_section_sets_the_limits():
    from sweep.kinds.base import static_limits
    from tests.jobs import cfg_of as job
    d = static_limits(job())
    assert d == kc.StaticLimits() and d.wheel_centre_offset == 0.1
    assert math.isclose(math.degrees(d.alignment_change), 10.0) and d.stop_penetration == 1e-4
    wide = static_limits(job("checks.alignment_change_deg=30", "checks.wheel_centre_offset=0.3",
                             "checks.allow_stop_at_rest=true"))
    assert wide.wheel_centre_offset == 0.3 and math.isclose(math.degrees(wide.alignment_change), 30.0)
    assert wide.stop_penetration is None
    # a state 16 deg of camber off: implausible by default, plausible within 30 deg
    model = toy()
    ws = np.asarray(model.topology.wheel_slots)
    r = model.r_design.at[ws[0], 5].add(math.radians(16.0))       # left wheel tilted about x
    assert not bool(kc.static_state_plausible(model, r, d)) and bool(kc.static_state_plausible(model, r, wide))
