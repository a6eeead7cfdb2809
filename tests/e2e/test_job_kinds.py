"""The job-kind protocol: a new kind is one module in sweep/kinds/ plus one
load-case config, and runs end to end through the one pipeline.

The toy kind (tests/e2e/fixtures/toy_kind/) is copied into a copy of the source
tree - nothing else is touched - and run with ``python -m sweep
loadcase=toy``; its cube is checked against values computed here from the
model file, and by ``python -m sweep.verify`` (which finds the kind's
channel table through the registry)."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root
FIXTURE = os.path.join(ROOT, "tests", "e2e", "fixtures", "toy_kind")


def _tree(tmp_path):
    for d in ("kernels", "sweep", "configs"):
        shutil.copytree(os.path.join(ROOT, d), tmp_path / d, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(os.path.join(FIXTURE, "toy.py"), tmp_path / "sweep" / "kinds" / "toy.py")
    shutil.copy(os.path.join(FIXTURE, "toy.yaml"), tmp_path / "configs" / "loadcase" / "toy.yaml")
    return tmp_path


def _run(tree, *args):
    env = dict(os.environ, PYTHONPATH=str(tree), AXLE_CPU_DEVICES="1")
    return subprocess.run([sys.executable, "-m", *args], cwd=tree, env=env, capture_output=True, text=True,
                          timeout=600)


def test_new_kind_is_one_module_and_one_config(tmp_path):
    xr = pytest.importorskip("xarray")
    tree = _tree(tmp_path)
    out = _run(tree, "sweep", "model=toy_trailing_arm", "loadcase=toy", "output.path=cube.zarr",
               "cache.enabled=false", "hydra.run.dir=h")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "toy: total mass" in out.stdout
    ds = xr.open_zarr(tree / "cube.zarr")
    assert ds.attrs["cube_kind"] == "toy"
    assert list(ds.step.values) == [1, 2, 3]
    # oracle: the masses as written in the model file
    spec = yaml.safe_load(open(os.path.join(ROOT, "configs", "model", "toy_trailing_arm.yaml")))
    masses = []

    def walk(node):
        if isinstance(node, dict):
            if "mass" in node and not isinstance(node["mass"], dict):
                masses.append(float(node["mass"]))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(spec.get("per_side", {}))
    per_side = sum(masses)
    masses.clear()
    walk(spec.get("shared", {}))
    total = 2 * per_side + sum(masses)
    assert float(ds.total_mass[0]) == pytest.approx(total, rel=1e-12)
    k = ds.stiffness_sum.values[0]
    assert k[0] > 0 and np.allclose(k, k[0] * np.array([1, 2, 3]), rtol=1e-12)
    assert int(ds.status[0]) == 0 and ds.status.attrs["flag_meanings"].split()[1] == "ok"
    ver = _run(tree, "sweep.verify", "cube.zarr")
    assert ver.returncode == 0 and "ok, 1 of 1 chunk(s)" in ver.stdout, ver.stdout + ver.stderr


def test_unknown_kind_is_one_line(tmp_path):
    tree = _tree(tmp_path)
    out = _run(tree, "sweep", "model=toy_trailing_arm", "loadcase=toy", "loadcase.kind=toys",
               "output.path=cube.zarr", "cache.enabled=false", "hydra.run.dir=h")
    assert out.returncode == 2
    assert "loadcase.kind = 'toys': must be one of frf, kc, modes, rough_road, time_response, toy" in out.stderr
    assert not (tree / "cube.zarr").exists()
