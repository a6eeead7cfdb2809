"""A user's force element through configuration: a model file's
``elements: ["module:ATTRIBUTE"]`` registers the group before the model is
built (sweep.axle.builder.load_element_groups), its section is then a model
key, and a wrong entry is one error naming it. The job with such an element:
tests/e2e/test_user_element_job.py."""
import copy

import pytest

from kernels import forces
from kernels.model import ModelError, build_model
from sweep.axle.builder import build_tables
from tests.conftest import load_model_cfg

ENTRY = "tests.sweep.user_elements:TORSION_SPRING"
TWIST = {"twist": {"bodies": ["arm", "wheel"], "at": "WC", "axis": [0, 1, 0], "stiffness": 500.0, "damping": 1.0}}


@pytest.fixture
def unregistered():
    forces.unregister_group("user_torsion_spring")
    yield
    forces.unregister_group("user_torsion_spring")


def toy_with(elements=None, section=True):
    cfg = copy.deepcopy(load_model_cfg("toy_trailing_arm"))
    if elements is not None:
        cfg["elements"] = elements
    if section:
        cfg["per_side"]["user_torsion_springs"] = copy.deepcopy(TWIST)
    return cfg


def test_a_model_file_loads_its_own_element(unregistered):
    model = build_model(build_tables(toy_with([ENTRY]), source=None))
    topo = model.topology
    assert "user_torsion_spring" in [g.name for g in topo.element_groups]
    assert list(topo.group_names["user_torsion_spring"]) == ["twist_left", "twist_right"]
    assert float(model.elements["user_torsion_spring"]["k"][0]) == 500.0
    # loading again (a second build, a rerun in the same process) keeps the one registration
    build_tables(toy_with([ENTRY]), source=None)


def test_without_elements_the_section_is_an_unknown_key(unregistered):
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
def test_a_wrong_elements_entry_names_itself(unregistered, entries, message):
    with pytest.raises(ModelError, match=message):
        build_tables(toy_with(entries, section=False), source=None)


def test_a_model_file_with_elements_loads_from_its_path(unregistered, tmp_path):
    """The model-file route (``model=path/to/file.yaml``, ``sweep.align``):
    the file's own ``elements:`` are registered before its keys are checked."""
    import yaml
    from sweep.axle.builder import load_model_file
    path = tmp_path / "toy_with_twist.yaml"
    path.write_text(yaml.safe_dump(toy_with([ENTRY])))
    cfg = load_model_file(str(path))
    model = build_model(build_tables(cfg, source=str(path)))
    assert list(model.topology.group_names["user_torsion_spring"]) == ["twist_left", "twist_right"]
