"""The model file's ``flexible_bodies`` section (sweep.model_builder): what
the builder makes of it, and its errors, each naming the field and value."""
import copy

import numpy as np
import pytest

from conftest import load_model_cfg
from kernels.model import ModelError, build_model
from sweep.model_builder import build_tables


@pytest.fixture(scope="module")
def cfg():
    return load_model_cfg("twist_beam")


def test_tables_of_the_twist_beam(cfg):
    tables = build_tables(cfg)
    (fb,) = tables["flexible_bodies"]
    body = next(b for b in tables["bodies"] if b["name"] == "cross_member")
    assert fb["body"] == body["index"] and len(fb["frequencies"]) == 12
    # the frame sits at the centre of mass: mid-way between the welds (the beam is symmetric)
    np.testing.assert_allclose(body["position"], [0.30, 0.0, 0.06], atol=1e-12)
    # 9.9e-4 m^2 x 7850 kg/m^3 x 1.2 m
    np.testing.assert_allclose(body["mass"], 9.9e-4 * 7850.0 * 1.2, rtol=1e-12)
    # both weld markers on the cross member are interfaces, at the weld points
    markers = {mk["index"]: mk for mk in tables["markers"]}
    at = sorted(tuple(np.round(markers[i["marker"]]["position"], 6)) for i in fb["interfaces"])
    assert at == [(0.3, -0.6, 0.06), (0.3, 0.6, 0.06)]
    build_model(tables)                  # the kernels accept them


@pytest.mark.parametrize("edit, message", [
    (lambda f: f["beam_frame"]["section"].pop("J"), "beam_frame.section: missing J"),
    (lambda f: f.pop("damping_ratio"), "damping_ratio: missing"),
    (lambda f: f.update(fixed_interface_modes=5), r"fixed_interface_modes = 5: gives 11 elastic modes .* use 6"),
    (lambda f: f.update(interfaces=[[0.3, 0.55, 0.0]]), r"interfaces\[0\] = \[0.3, 0.55, 0.0\].*is not a node"),
    (lambda f: f["beam_frame"].update(divisions=0), "divisions = 0"),
    (lambda f: f["beam_frame"]["section"].update(E=-1.0), r"cross_member: BeamFrame.sections\[0\].E = -1.0"),
])
def test_bad_flexible_body_names_field_and_value(cfg, edit, message):
    c = copy.deepcopy(cfg)
    edit(c["shared"]["flexible_bodies"]["cross_member"])
    with pytest.raises(ModelError, match=message):
        build_tables(c)


def test_an_element_off_the_interfaces_is_refused(cfg):
    c = copy.deepcopy(cfg)
    c["per_side"]["bushings"]["weld"]["at"] = [0.3, 0.5, 0.06]      # a beam node, not an interface
    with pytest.raises(ModelError, match=r"weld_left: its marker on flexible body cross_member .* is not at one "
                                         r"of the body's interfaces"):
        build_tables(c)


def test_an_unknown_key_is_named_with_its_path(cfg):
    c = copy.deepcopy(cfg)
    c["shared"]["flexible_bodies"]["cross_member"]["fixed_interface_mode"] = 6
    with pytest.raises(ModelError, match=r"model.shared.flexible_bodies.cross_member.fixed_interface_mode: "
                                         r"unknown key \(did you mean 'fixed_interface_modes'\?\)"):
        build_tables(c)
