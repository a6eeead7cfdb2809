"""Jobs from Python (sweep.workbench) and what a start costs: the memory of
compiled programs, the workbench's errors, Hydra's single composition. The
workbench's jobs themselves run in tests/e2e/test_workbench_jobs.py."""
import os
from types import SimpleNamespace

import numpy as np
import pytest

from kernels.model import ModelError
from sweep.engine.stream import Programs


def _runner(key="k", host=False, values_key="", example=None):
    fn = SimpleNamespace(host=host, values_key=values_key)
    return SimpleNamespace(key=key, fn=fn, device=None,
                           example=np.zeros((1, 3)) if example is None else example)


def test_programs_are_kept_by_structure_devices_and_chunk_shape():
    p = Programs(size=2)
    k = Programs.key(_runner(), 1)
    assert Programs.key(_runner(), 1) == k                        # the same structure: the same key
    assert Programs.key(_runner(key="other"), 1) != k             # another structure
    assert Programs.key(_runner(), 2) != k                        # other devices
    assert Programs.key(_runner(example=np.zeros((4, 3))), 1) != k   # another chunk shape
    assert Programs.key(_runner(key=None), 1) is None             # an unsure key is never kept
    p.put(None, "x")
    assert len(p) == 0
    # the generated C folds values in: its programs are kept per values digest
    a = Programs.key(_runner(host=True, values_key="v1"), 1)
    assert a != Programs.key(_runner(host=True, values_key="v2"), 1)
    # XLA programs read the values at run time: a values digest never splits them
    assert Programs.key(_runner(values_key="v1"), 1) == Programs.key(_runner(values_key="v2"), 1)


def test_programs_drop_the_least_recently_used():
    p = Programs(size=2)
    p.put("a", 1)
    p.put("b", 2)
    assert p.get("a") == 1            # a is now the most recent
    p.put("c", 3)
    assert p.get("b") is None and p.get("a") == 1 and p.get("c") == 3
    p.clear()
    assert len(p) == 0 and p.get("a") is None
    assert Programs(size=0).get("a") is None
    # folded values: only the latest values of a structure stay (each a library of its own)
    p = Programs(size=4)
    xla = Programs.key(_runner(), 1)
    v1, v2 = (Programs.key(_runner(host=True, values_key=v), 1) for v in ("v1", "v2"))
    p.put(xla, "x")
    p.put(v1, 1)
    p.put(v2, 2)
    assert p.get(v1) is None and p.get(v2) == 2 and p.get(xla) == "x"


@pytest.mark.parametrize("args, message", [
    (("-m", "sweep=lhs"), "a workbench runs one job"),
    (("integrator.relinearize_every=2",), "integrator.relinearize_every"),
    (("model=no_such_axle",), "no_such_axle"),
    (("model=/no/such/axle.yaml",), "model=/no/such/axle.yaml: no such model file"),
])
def test_workbench_config_errors_raise_before_anything_runs(args, message):
    from sweep.workbench import Workbench
    s = Workbench()
    with pytest.raises(ModelError, match=message):
        s.config(*args)


def test_workbench_config_is_the_command_lines(tmp_path):
    """A workbench composes what `python -m sweep` composes (its `--cfg job
    --resolve`): every key, the default output path with its override
    dirname; a model file given by its path."""
    import yaml
    from omegaconf import OmegaConf
    from sweep.workbench import Workbench
    from tests.jobs import cli
    s = Workbench()
    args = ("loadcase.wheel_loads.left.fz=4700", "model=toy_trailing_arm")
    proc = cli(*args, "--cfg", "job", "--resolve")
    assert proc.returncode == 0, proc.stderr
    cli_cfg = yaml.safe_load(proc.stdout)
    mine = OmegaConf.to_container(s.config(*args), resolve=True)
    cli_cfg.pop("cache", None)
    mine.pop("cache", None)
    assert mine == cli_cfg
    assert "loadcase.wheel_loads.left.fz=4700" in mine["output"]["path"]
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "configs", "model",
                       "toy_trailing_arm.yaml")
    axle = tmp_path / "my_axle.yaml"
    axle.write_text(open(src).read())
    assert s.config(f"model={axle}").model.name == "toy_trailing_arm"


@pytest.mark.parametrize("argv, may", [
    ([], False),
    (["sweep=lhs", "loadcase.wheel_loads.left.fz=4700", "hydra.run.dir=x"], False),
    (["hydra.mode=MULTIRUN"], True),
    (["+hydra.mode=MULTIRUN"], True),
    (["hydra/launcher=joblib"], True),
    (["--config-name", "tune_bump_steer"], True),
    (["-cn", "mine"], True),
])
def test_hydra_composes_once_unless_the_command_line_may_set_the_mode(argv, may):
    from sweep.entry import _may_set_mode
    assert _may_set_mode(argv) is may


@pytest.mark.parametrize("config_name", sorted(os.path.splitext(f)[0] for f in os.listdir(
    os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "configs"))
    if f.endswith(".yaml")))
def test_the_primary_configs_leave_hydras_mode_unset(config_name):
    """What lets the entry point skip Hydra's first composition (the one
    that only reads ``hydra.mode``): the project's configs never set it."""
    from hydra import compose, initialize_config_dir
    from sweep.core.runtime import CONFIG_DIR
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base="1.3"):
        cfg = compose(config_name=config_name, return_hydra_config=True)
    assert cfg.hydra.mode is None
