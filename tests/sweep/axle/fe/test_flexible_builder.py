"""The model file's ``flexible_bodies`` section (sweep.axle.builder): what
the builder makes of it, and its errors, each naming the field and value."""
import copy

import numpy as np
import pytest

from tests.conftest import load_model_cfg
from kernels.model import ModelError, build_model
from sweep.axle.builder import build_tables


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


def test_fe_export_gives_the_same_body_and_its_reduction_is_cached(cfg, tmp_path, monkeypatch):
    """The second input path: the cross member's beam-frame matrices written
    as an FE export (.npz, node positions in the vehicle frame) give the same
    flexible body as the beam_frame entry; the reduction is cached beside the
    compilation cache and read back (a second build does not reduce again)."""
    from sweep.axle.fe import BeamFrame, Section, assemble, craig_bampton
    from sweep.axle.builder import _Side
    monkeypatch.setenv("AXLE_JAX_CACHE_DIR", str(tmp_path / "cache"))
    spec = cfg["shared"]["flexible_bodies"]["cross_member"]
    bf = spec["beam_frame"]
    side = _Side(cfg["hardpoints"], "left")
    a, b = (side.point(p, "path") for p in bf["path"])
    nodes = np.array([a + (b - a) * k / bf["divisions"] for k in range(bf["divisions"] + 1)])
    M, K = assemble(BeamFrame(nodes=nodes, elements=np.array([[i, i + 1] for i in range(len(nodes) - 1)]),
                              sections=Section(**bf["section"]), orientation=np.asarray(bf["orientation"], float)))
    np.savez(tmp_path / "cross.npz", M=M.toarray(), K=K.toarray(), nodes=nodes)
    c = copy.deepcopy(cfg)
    fx = c["shared"]["flexible_bodies"]["cross_member"]
    fx.pop("beam_frame")
    fx["fe_export"] = {"npz": str(tmp_path / "cross.npz")}
    ref = build_tables(cfg)["flexible_bodies"][0]
    got = build_tables(c)["flexible_bodies"][0]
    np.testing.assert_allclose(got["frequencies"], ref["frequencies"], rtol=1e-9)
    for gi, ri in zip(got["interfaces"], ref["interfaces"]):
        # mode shapes up to the sign of each mode (both made deterministic the same way)
        np.testing.assert_allclose(np.abs(gi["translation"]), np.abs(ri["translation"]), atol=1e-9)
    assert len(list((tmp_path / "cache" / "craig_bampton").glob("craig_bampton-*.npz"))) == 1
    monkeypatch.setattr(craig_bampton, "reduce", lambda *a, **k: (_ for _ in ()).throw(AssertionError("reduced")))
    again = build_tables(c)["flexible_bodies"][0]
    np.testing.assert_array_equal(again["frequencies"], got["frequencies"])
    # errors: both FE models, a missing file
    both = copy.deepcopy(c)
    both["shared"]["flexible_bodies"]["cross_member"]["beam_frame"] = bf
    with pytest.raises(ModelError, match="give exactly one FE model, beam_frame or fe_export"):
        build_tables(both)
    gone = copy.deepcopy(c)
    gone["shared"]["flexible_bodies"]["cross_member"]["fe_export"] = {"npz": "no/such.npz"}
    with pytest.raises(ModelError, match=r"fe_export.npz = 'no/such.npz': no such file"):
        build_tables(gone)
