"""A user's force element through configuration: a model file's
``elements: ["module:ATTRIBUTE"]`` adds the group to the model's registry
before the model is built (sweep.axle.builder.load_element_groups; the
tables name it, nothing is registered globally), its section is then a
model key, and a wrong entry is one error naming it. The job with such an element:
tests/e2e/test_user_element_job.py."""
import copy

import pytest

from kernels import forces
from kernels.model import ModelError, build_model
from sweep.axle.builder import build_tables
from tests.conftest import load_model_cfg

ENTRY = "tests.sweep.user_elements:TORSION_SPRING"
TWIST = {"twist": {"bodies": ["arm", "wheel"], "at": "WC", "axis": [0, 1, 0], "stiffness": 500.0, "damping": 1.0}}


def toy_with(elements=None, section=True):
    cfg = copy.deepcopy(load_model_cfg("toy_trailing_arm"))
    if elements is not None:
        cfg["elements"] = elements
    if section:
        cfg["per_side"]["user_torsion_springs"] = copy.deepcopy(TWIST)
    return cfg


def test_a_model_file_loads_its_own_element():
    model = build_model(build_tables(toy_with([ENTRY]), source=None))
    topo = model.topology
    assert "user_torsion_spring" in [g.name for g in topo.element_groups]
    assert list(topo.group_names["user_torsion_spring"]) == ["twist_left", "twist_right"]
    assert float(model.elements["user_torsion_spring"]["k"][0]) == 500.0
    # loading again (a second build, a rerun in the same process) is the same group: the same structure
    again = build_model(build_tables(toy_with([ENTRY, ENTRY]), source=None))
    assert again.topology == topo and again.topology.extra_groups == topo.extra_groups
    # nothing leaks: a model file without the entry knows no such section
    assert "user_torsion_spring" not in forces.BUILTIN


def test_without_elements_the_section_is_an_unknown_key():
    with pytest.raises(ModelError, match=r"model.per_side.user_torsion_springs: unknown key .*"
                                         r"a force element of your own needs its module in model.elements"):
        build_tables(toy_with(None), source=None)


@pytest.mark.parametrize("entries, message", [
    ("tests.sweep.user_elements:TORSION_SPRING", r"model.elements = .*must be a list"),
    (["tests.sweep.user_elements"], r"model.elements\[0\] = .*must be 'module:ATTRIBUTE'"),
    (["no_such_module_anywhere:X"], r"model.elements\[0\] = .*cannot import module 'no_such_module_anywhere' "
                                    r"\(ModuleNotFoundError"),
    (["tests.sweep.user_elements:NOPE"], r"model.elements\[0\] = .*has no attribute 'NOPE'"),
    (["tests.sweep.user_elements:NOT_A_GROUP"], r"model.elements\[0\] = .*42 is not a kernels.forces.ElementGroup"),
    (["tests.sweep.user_elements:CLASHING"], r"model.elements\[0\] = .*table key 'bushings' is reserved or used"),
])
def test_a_wrong_elements_entry_names_itself(entries, message):
    with pytest.raises(ModelError, match=message):
        build_tables(toy_with(entries, section=False), source=None)


def test_a_model_file_with_elements_loads_from_its_path(tmp_path):
    """The model-file route (``model=path/to/file.yaml``, ``sweep.align``):
    the file's own ``elements:`` are added before its keys are checked."""
    import yaml
    from sweep.axle.builder import load_model_file
    path = tmp_path / "toy_with_twist.yaml"
    path.write_text(yaml.safe_dump(toy_with([ENTRY])))
    cfg = load_model_file(str(path))
    model = build_model(build_tables(cfg, source=str(path)))
    assert list(model.topology.group_names["user_torsion_spring"]) == ["twist_left", "twist_right"]


def test_a_group_reads_its_model_file_section_with_its_own_row():
    """A group's ``row`` turns its model-file entries into table rows with the
    builder's placement (points, frames, markers, the side): the torsion
    spring given in N m/deg with a left-side preload that flips on the right;
    the built-in bushing and P2P rows come through the same route."""
    import numpy as np
    cfg = toy_with(["tests.sweep.user_elements:TORSION_BY_DEGREE"], section=False)
    cfg["per_side"]["user_torsion_by_degree"] = {
        "twist": {"bodies": ["arm", "wheel"], "at": "WC", "axis": [0, 1, 0], "rate": 10.0, "preload_torque": 3.0}}
    tables = build_tables(cfg, source=None)
    rows = tables["user_torsion_by_degree"]
    assert [r["name"] for r in rows] == ["twist_left", "twist_right"]
    assert [r["preload_torque"] for r in rows] == [3.0, -3.0]
    np.testing.assert_allclose(rows[0]["stiffness"], 10.0 * 180.0 / np.pi, rtol=1e-15)
    markers = {m["index"]: m for m in tables["markers"]}
    left, right = (markers[r["marker_1"]] for r in rows)
    assert left["name"] == "twist_left/1" and right["name"] == "twist_right/1"
    wc = np.asarray(cfg["hardpoints"]["WC"], float)
    np.testing.assert_allclose(left["position"], wc)
    np.testing.assert_allclose(right["position"], wc * [1, -1, 1])           # the mirror image
    model = build_model(tables)
    np.testing.assert_allclose(model.elements["user_torsion_by_degree"]["k"], [10.0 * 180.0 / np.pi] * 2)
    # the row's errors name the model-file path (the placement's and the group's own)
    bad = copy.deepcopy(cfg)
    bad["per_side"]["user_torsion_by_degree"]["twist"]["at"] = "NOPE"
    with pytest.raises(ModelError, match=r"model.user_torsion_by_degree.twist_left.at = 'NOPE' is not a hardpoint"):
        build_tables(bad, source=None)
    bad = copy.deepcopy(cfg)
    bad["per_side"]["user_torsion_by_degree"]["twist"]["rate"] = "stiff"
    with pytest.raises(ModelError, match=r"model.per_side.user_torsion_by_degree.twist.rate = 'stiff': "
                                         r"must be a number"):      # the group's declared numbers
        build_tables(bad, source=None)
    bad = copy.deepcopy(cfg)
    bad["per_side"]["user_torsion_by_degree"]["twist"] = 5
    with pytest.raises(ModelError, match=r"model.user_torsion_by_degree.twist_left must be a mapping"):
        build_tables(bad, source=None)
    # the built-in groups declare their rows the same way
    assert forces.BUILTIN["bushing"].row is forces.bushing_row and forces.BUILTIN["p2p"].row is forces.p2p_row


@pytest.mark.parametrize("key, value, message", [
    ("stiffness", -5.0, r"model.per_side.user_torsion_springs.twist.stiffness = -5.0: must be >= 0"),
    ("damping", "soft", r"model.per_side.user_torsion_springs.twist.damping = 'soft': .*number"),
])
def test_a_group_declares_its_number_keys(key, value, message):
    """The number keys a group declares are checked like the built-in groups'
    (the config path and the value), before its rows are built; the
    built-in groups' declarations are what the job config's check reads."""
    from sweep.core.config import check_model, model_numbers
    cfg = toy_with([ENTRY])
    cfg["per_side"]["user_torsion_springs"]["twist"][key] = value
    with pytest.raises(ModelError, match=message):
        build_tables(cfg, source=None)
    nums = model_numbers(forces.BUILTIN)
    assert nums["bushings"]["stiffness"] == "non_negative" and nums["p2p"]["stiffness"] == "any"
    assert nums["bushing_types"] is nums["bushings"] and nums["bushings"]["mass"] == "positive"
    bad = toy_with(None, section=False)
    name = next(iter(bad["per_side"]["bushings"]))
    bad["per_side"]["bushings"][name]["damping"] = [-1.0] * 6
    with pytest.raises(ModelError, match=rf"model.per_side.bushings.{name}.damping\[0\] = -1.0: must be >= 0"):
        check_model(bad)
    p2p = next(iter(bad["per_side"].get("p2p") or {}), None)
    if p2p is not None:                       # a P2P preload may be negative (a rebound spring's)
        ok = toy_with(None, section=False)
        ok["per_side"]["p2p"][p2p]["preload"] = -10.0
        check_model(ok)
    with pytest.raises(ValueError, match="numbers .* must each be one of"):
        forces.ElementGroup("test_bad_numbers", "test_bad_numbers", None, numbers={"k": "negative"})
