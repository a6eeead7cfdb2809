"""A Python workbench (sweep.workbench) runs jobs as the command line does and
keeps their compiled programs: a changed load or hardpoint reruns without a
compile and gives the numbers of a fresh process that traced and compiled
the changed model from scratch."""
import logging

import numpy as np
import pytest
import xarray as xr

from tests.jobs import cli

TOY = ["model=toy_trailing_arm", "loadcase.t_start=4.95", "loadcase.t_end=5.05"]
CHANNELS = ("wheel_centre_displacement", "toe", "camber", "bushing_force")


def _close(a, b):
    """The issue's round-off rule: |a - b| <= 1e-12 max|b| per channel."""
    for name in CHANNELS:
        x, y = np.asarray(a[name]), np.asarray(b[name])
        assert np.all(np.abs(x - y) <= 1e-12 * np.max(np.abs(y))), name


def test_a_workbench_reruns_changed_values_without_compiling(tmp_path, caplog):
    from sweep.workbench import Workbench
    s = Workbench()
    caplog.set_level(logging.INFO, logger="sweep")
    first = s.run(*TOY, f"output.path={tmp_path}/a.zarr")
    assert "kept in memory" not in caplog.text
    caplog.clear()
    changed = (*TOY, "loadcase.wheel_loads.left.fz=4100", "model.hardpoints.SA=[-0.1,0.68,-0.045]")
    second = s.run(*changed, f"output.path={tmp_path}/b.zarr")
    assert "compiled in 0.0 s (reused: kept in memory" in caplog.text
    assert len(s.programs) == 1
    # the values really changed the results ...
    assert not np.allclose(first.wheel_centre_displacement, second.wheel_centre_displacement)
    # ... and equal a fresh process's, traced and compiled with no cache at all
    ref = tmp_path / "fresh.zarr"
    proc = cli(*changed, "cache.enabled=false", f"output.path={ref}", f"hydra.run.dir={tmp_path}/hydra")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    _close(second, xr.open_zarr(ref, chunks=None))
    # the same job again: nothing to do, the cube as it was
    again = s.run(*changed, f"output.path={tmp_path}/b.zarr")
    np.testing.assert_array_equal(again.toe, second.toe)
    # a bad value is the command line's one-line error, raised; nothing is kept in its name
    from kernels.model import ModelError
    with pytest.raises(ModelError, match="integrator.dt"):
        s.run(*TOY, "integrator.dt=0.0007", f"output.path={tmp_path}/d.zarr")
