"""The model file is read strictly (sweep/axle/builder.py): an unknown key
anywhere is an error with its full path, the closest known key and the
file:line; a duplicate key, a YAML syntax error and an empty file are one
line with file:line:column; the alignment section's names are checked by
every entry point. Oracle: the shipped axle files (every key they use is
known) and files written here with one defect each."""
import copy
import glob
import os

import pytest
import yaml

from kernels.model import ModelError
from sweep.axle import builder as mb
from tests.conftest import ROOT, load_model_cfg

MODELS = sorted(os.path.basename(f)[:-5] for f in glob.glob(os.path.join(ROOT, "configs", "model", "*.yaml")))


@pytest.mark.parametrize("name", MODELS)
def test_shipped_models_use_only_known_keys(name):
    assert mb.unknown_keys(load_model_cfg(name)) == []


def _typo(cfg, path, new_key):
    """Rename the last key of ``path`` (a list of keys) to ``new_key``."""
    node = cfg
    for k in path[:-1]:
        node = node[k]
    node[new_key] = node.pop(path[-1])
    return cfg


# (path of a key the double wishbone has, misspelling, the hint)
TYPOS = [
    (["per_side", "bushings", "upper_arm_rear", "type"], "typ", "did you mean 'type'?"),
    (["per_side", "p2p", "main_spring", "seat_offset"], "seat_ofset", "did you mean 'seat_offset'?"),
    (["bushing_types", "ball_joint", "stiffness"], "stifness", "did you mean 'stiffness'?"),
    (["per_side", "bodies", "wheel", "mass"], "mas", "did you mean 'mass'?"),
    (["vehicle", "wheelbase"], "wheel_base", "did you mean 'wheelbase'?"),
    (["alignment", "toe_deg"], "toe_degree", "did you mean 'toe_deg'?"),
    (["reference_bushing"], "reference_bushings", "did you mean 'reference_bushing'?"),
    (["per_side", "bushings", "upper_arm_rear", "axis", "along"], "alongside", "did you mean 'along'?"),
]


@pytest.mark.parametrize("path, typo, hint", TYPOS, ids=[t[1] for t in TYPOS])
def test_a_misspelt_key_is_an_error_with_path_hint_and_line(path, typo, hint, tmp_path):
    cfg = _typo(load_model_cfg(), path, typo)
    # written to a file of its own: the error names the line the key is on
    f = tmp_path / "axle.yaml"
    f.write_text(yaml.safe_dump(cfg, sort_keys=False))
    line = next(i + 1 for i, text in enumerate(f.read_text().splitlines())
                if text.lstrip().startswith(typo + ":") or f" {typo}:" in text or f"{{{typo}:" in text)
    with pytest.raises(ModelError) as err:
        mb.load_model_file(str(f))
    msg = str(err.value)
    assert msg.startswith("model." + ".".join(path[:-1] + [typo]) + ": unknown key"), msg
    assert hint in msg and msg.endswith(f"[{f}:{line}]"), msg
    # the same check runs wherever tables are built (without the file: no line)
    with pytest.raises(ModelError, match="unknown key"):
        mb.build_tables(cfg)


def test_an_unknown_key_three_levels_under_a_bushing_type():
    cfg = load_model_cfg()
    cfg["bushing_types"]["ball_joint"]["stiffness_curves"] = {"z": {"x": [0.0, 1.0], "y": [0.0, 1e8],
                                                                    "interp": "linear"}}
    assert mb.unknown_keys(cfg) == [("model.bushing_types.ball_joint.stiffness_curves.z.interp",
                                     ["interpolation", "x", "y"])]
    with pytest.raises(ModelError, match="did you mean 'interpolation'"):
        mb.build_tables(cfg)


def test_no_close_key_lists_the_known_ones_and_counts_the_others():
    cfg = load_model_cfg("toy_trailing_arm")
    cfg["wheels"]["middle"] = "x"
    cfg["gravity_vector"] = [0, 0, -9.81]
    with pytest.raises(ModelError) as err:
        mb.check_keys(cfg)
    # the first in the file's order, and how many more there are
    assert str(err.value) == "model.wheels.middle: unknown key (known: left, right) (and 1 more unknown key(s))"
    del cfg["wheels"]["middle"]
    with pytest.raises(ModelError) as err:
        mb.check_keys(cfg)
    assert str(err.value) == "model.gravity_vector: unknown key (did you mean 'gravity'?)"


def test_the_users_names_are_free_but_their_entries_are_checked():
    cfg = load_model_cfg("toy_trailing_arm")
    cfg["hardpoints"]["ANY_NAME_1"] = [0.1, 0.2, 0.3]                 # names: free
    body = next(iter(cfg["per_side"]["bodies"]))
    cfg["per_side"]["bodies"][body]["inertia_diag"] = [1, 1, 1]       # entries: checked
    assert [p for p, _ in mb.unknown_keys(cfg)] == [f"model.per_side.bodies.{body}.inertia_diag"]


@pytest.mark.parametrize("text, message", [
    ("name: a\nname: b\n", ":2:1: duplicate key 'name' (first at line 1)"),
    ("name: [a\n", ":2:1: expected ',' or ']'"),
    ("", ": is empty"),
    ("- a\n- b\n", ": is not a mapping of model keys"),
])
def test_broken_model_files_are_one_line_with_file_line_column(text, message, tmp_path):
    f = tmp_path / "axle.yaml"
    f.write_text(text)
    with pytest.raises(ModelError) as err:
        mb.load_model_file(str(f))
    assert str(f) in str(err.value) and message in str(err.value), str(err.value)
    assert "\n" not in str(err.value)


def test_an_empty_model_config_says_so():
    with pytest.raises(ModelError, match="the model config is empty"):
        mb.build_tables({})


@pytest.mark.parametrize("key, value, message", [
    ("toe_by", "no_such_joint", "model.alignment.toe_by = 'no_such_joint': no per-side bushing"),
    ("camber_by", "upper_arm_rear", "model.alignment.camber_by = 'upper_arm_rear': no per-side bushing of "
                                    "that name with an `adjust` entry"),
    ("seat_offset_of", "no_spring", "model.alignment.seat_offset_of = 'no_spring': no per-side P2P"),
])
def test_alignment_names_are_checked_wherever_tables_are_built(key, value, message):
    cfg = load_model_cfg()
    cfg = copy.deepcopy(cfg)
    cfg["alignment"][key] = value
    with pytest.raises(ModelError) as err:
        mb.build_tables(cfg)
    assert message in str(err.value)


@pytest.mark.parametrize("text, message", [
    ("name: a\nname: b\n", "duplicate key 'name'"),
    ("name: [a\n", "expected ',' or ']'"),
])
def test_align_and_the_sweep_command_line_read_the_model_file_strictly(text, message, tmp_path, capsys,
                                                                       caplog, monkeypatch):
    from sweep import align, entry
    f = tmp_path / "model" / "broken_axle.yaml"
    f.parent.mkdir()
    f.write_text(text)
    assert align.main([str(f)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {f}:") and message in err and "\n" not in err, err
    # python -m sweep model=broken_axle: the file is read before Hydra composes it
    monkeypatch.setattr(entry, "CONFIG_DIR", str(tmp_path))
    with pytest.raises(SystemExit) as stop:
        entry.precheck_config_files(["model=broken_axle", "sweep=lhs"])
    assert stop.value.code == 2
    assert [r.getMessage() for r in caplog.records] == [f"error: {f}:2:1: " + err.split(":2:1: ")[1]]
    entry.precheck_config_files(["model=double_wishbone"])     # not in tmp_path: left to Hydra
    # any config group, and the primary config
    (tmp_path / "loadcase").mkdir()
    (tmp_path / "loadcase" / "twice.yaml").write_text(text)
    with pytest.raises(SystemExit):
        entry.precheck_config_files(["loadcase=twice"])
    (tmp_path / "config.yaml").write_text(text)
    with pytest.raises(SystemExit):
        entry.precheck_config_files([])
    monkeypatch.setattr(entry, "CONFIG_DIR", os.path.join(ROOT, "configs"))
    # a user's own model directory on hydra.searchpath (relative to the working
    # directory, as Hydra resolves it): read strictly as well; a shipped name
    # is taken from the project's configs first, as Hydra does
    monkeypatch.chdir(tmp_path)
    for argv in (["hydra.searchpath=[file://.]", "model=broken_axle"],
                 ["model=broken_axle", f"hydra.searchpath=['pkg://nothing', 'file://{tmp_path}']"]):
        caplog.clear()
        with pytest.raises(SystemExit) as stop:
            entry.precheck_config_files(argv)
        assert stop.value.code == 2 and caplog.records[0].getMessage().startswith(f"error: {f}:2:1: ")
    (tmp_path / "model" / "double_wishbone.yaml").write_text(text)
    entry.precheck_config_files(["hydra.searchpath=[file://.]", "model=double_wishbone"])
    # the shipped files: nothing to say
    entry.precheck_config_files(["model=double_wishbone,multilink,toy_trailing_arm", "loadcase=kc_wheel_travel",
                                 "sweep=lhs", "integrator=lsrt2"])
    entry.precheck_config_files([], "tune")


def test_every_shipped_config_file_reads_strictly():
    import glob
    files = glob.glob(os.path.join(ROOT, "configs", "**", "*.yaml"), recursive=True)
    assert len(files) > 15
    for f in files:
        mb.load_yaml_strict(f)
