"""Output channels are declared once (sweep.kinds.time_response.CHANNELS): a channel
added to the table - one edit - reaches the cube with its dims, units and
long name, shapes by jax.eval_shape, also when variants fail (NaN fill) and
with the Radau reference path. (That the single-variant path kernels.response.solve and
the engine's cube agree: tests/e2e/test_app.py::test_cube_equals_direct_kernel_run.)"""
import pytest


TOY = ["model=toy_trailing_arm", "loadcase.t_end=5.2", "sweep.start=4.9", "sweep.progress=false",
       "cache.enabled=false"]


def _wheel_centre_height(s):
    from kernels import metrics
    return metrics.wheel_centre_position(s.model, s.r)[:, 2]


@pytest.fixture
def extra_channel(monkeypatch):
    """One new entry in the channel table: wheel-centre height [m] per side."""
    from sweep.kinds import time_response
    from sweep.engine.layout import Channel
    ch = Channel("wheel_centre_height", ("side",), "m", "wheel-centre height above the ground plane",
                 _wheel_centre_height)
    monkeypatch.setattr(time_response, "CHANNELS", [*time_response.CHANNELS, ch])
    return ch


def test_channel_shapes_come_from_eval_shape(dw_model, extra_channel):
    from sweep.kinds import time_response
    shapes = time_response.channel_shapes(dw_model, [0, 3, 7])
    assert shapes == {"wheel_centre_displacement": (2, 3), "toe": (2,), "camber": (2,),
                      "bushing_force": (3, 6), "wheel_centre_height": (2,)}


def test_a_channel_whose_dims_do_not_match_its_value_is_refused(dw_model, monkeypatch):
    from sweep.kinds import time_response
    from sweep.engine.layout import Channel
    bad = Channel("toe_again", ("side", "axis"), "rad", "toe", lambda s: s.r[:2, 0])
    monkeypatch.setattr(time_response, "CHANNELS", [*time_response.CHANNELS, bad])
    with pytest.raises(ValueError, match="toe_again"):
        time_response.channel_shapes(dw_model, None)


def test_the_cube_channels_are_the_drivers_outputs():
    """The time-response cube's channel table declares the driver's outputs
    (kernels.response.OUTPUTS, what ``solve`` returns), in the same order and
    with the same functions, so that a script's ``solve`` and the job's cube
    hold the same quantities (a new time-response channel: its function in
    the driver's table, its dims and units declared here)."""
    from kernels import response
    from sweep.kinds import time_response
    assert [c.name for c in time_response.CHANNELS] == list(response.OUTPUTS)
    assert all(c.fn is response.OUTPUTS[c.name] for c in time_response.CHANNELS)


def test_an_element_group_with_an_output_adds_its_force_channel():
    """A model's added element group that declares ``output`` adds
    ``<group>_force`` (its elements, component) after the table's channels;
    one without an output adds nothing (its value: test_element_registry)."""
    import dataclasses
    from kernels.model import build_model
    from sweep.axle.builder import build_tables
    from sweep.kinds import time_response
    from tests.kernels.test_element_registry import NAME, TORSION, dw_cfg
    model = build_model(build_tables(dw_cfg(), groups=(TORSION,)))
    chans = time_response.channels_of(model)
    assert [c.name for c in chans] == [c.name for c in time_response.CHANNELS] + [f"{NAME}_force"]
    extra = chans[-1]
    assert extra.dims == (NAME, "component") and extra.units == "none"
    shapes = time_response.channel_shapes(model, [0, 3])
    assert shapes[f"{NAME}_force"] == (2, 6) and shapes["bushing_force"] == (2, 6)
    quiet = dataclasses.replace(TORSION, output=None)
    plain = build_model(build_tables(dw_cfg(), groups=(quiet,)))
    assert time_response.channels_of(plain) == tuple(time_response.CHANNELS)


def test_a_group_whose_name_the_cube_has_already_is_refused():
    """A group with an output named like a channel of the cube (``toe``:
    dimension ``toe`` beside the variable ``toe``) or a swept parameter is one
    error naming it, before anything is compiled."""
    import dataclasses
    from kernels.model import build_model
    from sweep.axle.builder import build_tables
    from sweep.axle.params import build_parameters
    from sweep.core.config import ConfigError
    from sweep.kinds import time_response
    from tests.kernels.test_element_registry import TORSION, dw_cfg
    toe = dataclasses.replace(TORSION, name="toe")
    model = build_model(build_tables(dw_cfg(), groups=(toe,)))
    with pytest.raises(ConfigError, match="element group 'toe': 'toe' is already a name of the time-response cube"):
        time_response._check_group_names(time_response.channels_of(model), build_parameters({}, model))
    ok = build_model(build_tables(dw_cfg(), groups=(TORSION,)))
    pset = build_parameters({"test_torsion_spring_force": {"target": "bushing.stiffness", "elements": "upper_arm_*",
                                                           "bounds": [0.5, 2.0]}}, ok)
    with pytest.raises(ConfigError, match="'test_torsion_spring_force' is already a name"):
        time_response._check_group_names(time_response.channels_of(ok), pset)
    time_response._check_group_names(time_response.channels_of(ok), build_parameters({}, ok))
