"""A short job under ``integrator.backend=auto`` runs on XLA and then builds
its generated code in the background (sweep.prebuild); the next run of the
structure - here with a changed wheel load - runs on that code, and its
numbers equal XLA's for the changed load."""
import os
import subprocess
import sys
import time

import numpy as np
import xarray as xr

from tests.conftest import ROOT

TOY = ["model=toy_trailing_arm", "loadcase.t_start=4.95", "loadcase.t_end=5.05", "sweep.progress=false"]


def _run(env, *args):
    proc = subprocess.run([sys.executable, "-m", "sweep", *TOY, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stderr + proc.stdout


def test_a_short_job_builds_its_generated_code_for_the_next_run(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "AXLE_AUTO_BACKEND"}
    env["AXLE_JAX_CACHE_DIR"] = str(tmp_path / "cache" / "jax")        # generated code: cache/generated
    first = _run(env, f"output.path={tmp_path}/a.zarr")
    assert "runs on XLA" in first and "building the generated C of this structure in the background" in first
    folder = tmp_path / "cache" / "generated"
    log = folder / "prebuild.log"
    deadline = time.time() + 300              # the build's last line says how it ended
    while not (log.exists() and "prebuild " in log.read_text()) and time.time() < deadline:
        time.sleep(1)
    assert ": generated (" in log.read_text(), log.read_text()
    assert not any(p.name.endswith((".building", ".failed")) for p in folder.iterdir())
    assert not any(p.name.startswith("prebuild-") and p.suffix == ".yaml" for p in folder.iterdir())
    second = _run(env, "loadcase.wheel_loads.left.fz=4100", f"output.path={tmp_path}/b.zarr")
    assert "runs on the generated code that an earlier run built" in second, second
    assert "values are run-time inputs" in second and "building the generated C" not in second
    third = _run(env, "loadcase.wheel_loads.left.fz=4100", "integrator.backend=xla", f"output.path={tmp_path}/c.zarr")
    assert "generated" not in third.split("compiling")[1].split("\n")[0]
    b, c = xr.open_zarr(tmp_path / "b.zarr"), xr.open_zarr(tmp_path / "c.zarr")
    for name in ("wheel_centre_displacement", "toe", "camber", "bushing_force"):
        want = np.asarray(c[name])
        assert np.max(np.abs(np.asarray(b[name]) - want)) <= 1e-10 * np.max(np.abs(want)), name
    assert not np.allclose(np.asarray(xr.open_zarr(tmp_path / "a.zarr").wheel_centre_displacement),
                           np.asarray(b.wheel_centre_displacement))
