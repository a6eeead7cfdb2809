"""``python -m sweep`` and ``python -m sweep.align`` select a model the same
two ways: ``model=NAME`` (the project's configs, then ``hydra.searchpath``)
and a path to a model file."""
import os
import shutil
import subprocess
import sys

import pytest

from sweep.entry import model_file_args
from tests.conftest import ROOT

TOY = os.path.join(ROOT, "configs", "model", "toy_trailing_arm.yaml")


def own_axle(folder, name="my_axle"):
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{name}.yaml")
    text = open(TOY).read().replace("name: toy_trailing_arm", f"name: {name}")
    open(path, "w").write(text)
    return path


def test_a_model_path_becomes_a_name_on_the_search_path(tmp_path):
    path = own_axle(tmp_path / "anywhere")
    args = model_file_args([f"model={path}", "loadcase=modes", "--cfg", "job"])
    assert args[0] == "model=my_axle" and args[2:] == ["loadcase=modes", "--cfg", "job"]
    root = args[1].split("file://")[1].rstrip("]")
    assert os.path.samefile(os.path.join(root, "model", "my_axle.yaml"), path)
    # a file already in a model/ folder: its parent is the search path, merged with one given
    path = own_axle(tmp_path / "axles" / "model")
    args = model_file_args(["hydra.searchpath=[file:///x]", f"model={path}"])
    assert args == [f"hydra.searchpath=[file:///x,file://{tmp_path / 'axles'}]", "model=my_axle"]
    # a file named like a shipped model is never shadowed by it
    shadow = tmp_path / "elsewhere" / "double_wishbone.yaml"
    os.makedirs(shadow.parent)
    shutil.copy(TOY, shadow)
    assert model_file_args([f"model={shadow}"])[0] == "model=file_double_wishbone"
    assert model_file_args(["model=toy_trailing_arm", "x=1"]) == ["model=toy_trailing_arm", "x=1"]


def test_the_private_folder_of_a_model_path_goes_with_its_process(tmp_path):
    """The private search-path folder (a link to the file) is removed when
    the process ends: a user's runs leave no folders in the temp directory."""
    path = own_axle(tmp_path / "anywhere")
    code = ("import sys; from sweep.entry import model_file_args; "
            f"print(model_file_args(['model={path}'])[1].split('file://')[1].rstrip(']'))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    root = proc.stdout.strip()
    assert proc.returncode == 0 and os.path.basename(root).startswith("axle-model-"), proc.stderr
    assert os.path.isabs(root) and not os.path.exists(root)


def test_the_job_composes_a_model_given_by_path(tmp_path):
    path = own_axle(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "sweep", f"model={path}", "--cfg", "job"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "name: my_axle" in proc.stdout


def test_align_takes_a_name_on_the_search_path_and_a_path(tmp_path):
    from sweep.align import model_path, parse_args
    from sweep.core.config import ConfigError
    path = own_axle(tmp_path / "model")
    name, dirs = parse_args(["model=my_axle", f"hydra.searchpath=[file://{tmp_path}]"])
    assert os.path.samefile(model_path(name, dirs), path)
    assert parse_args([str(path)]) == (str(path), [])
    assert parse_args(["double_wishbone"]) == ("double_wishbone", [])
    assert parse_args(["a", "b"]) is None
    assert model_path("double_wishbone").endswith(os.path.join("configs", "model", "double_wishbone.yaml"))
    with pytest.raises(ConfigError, match="no such model config .*looked in"):
        model_path("my_axle")
