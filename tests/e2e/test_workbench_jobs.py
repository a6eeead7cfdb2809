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


def _close(a, b, rel=1e-12):
    """The issue's round-off rule: |a - b| <= 1e-12 max|b| per channel."""
    for name in CHANNELS:
        x, y = np.asarray(a[name]), np.asarray(b[name])
        assert np.all(np.abs(x - y) <= rel * np.max(np.abs(y))), name


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
    # (to 1e-10 here: the kept program is the trace cache's deserialised one, the fresh process
    # traces directly, and the elemental fusion emitter the tests compile with orders some of
    # their operations differently; the 1e-12 rule itself, under XLA's default emitter:
    # tests/sweep/engine/test_values_numbers.py)
    _close(second, xr.open_zarr(ref, chunks=None), rel=1e-10)
    # the same job again: nothing to do, the cube as it was
    again = s.run(*changed, f"output.path={tmp_path}/b.zarr")
    np.testing.assert_array_equal(again.toe, second.toe)
    # a bad value is the command line's one-line error, raised; nothing is kept in its name
    from kernels.model import ModelError
    with pytest.raises(ModelError, match="integrator.dt"):
        s.run(*TOY, "integrator.dt=0.0007", f"output.path={tmp_path}/d.zarr")


INTERRUPTED = r"""
import os, signal, sys
from sweep.workbench import Workbench
from sweep.engine.stops import RunContext
args = sys.argv[1:]
RunContext.on_chunk_written = staticmethod(lambda n: os.kill(os.getpid(), signal.SIGINT) if n == 1 else None)
wb = Workbench()
try:
    wb.run(*args)
except KeyboardInterrupt as stop:
    print("STOPPED:", stop)
RunContext.on_chunk_written = None
ds = wb.run(*args)
print("STATUS:", sorted(set(ds.status.values.tolist())), ds.sizes["variant"])
"""


def test_an_interrupted_workbench_job_stops_cleanly_and_resumes(tmp_path):
    """Ctrl-C in a notebook: the job stops after its written chunk with the
    command line's line, the process (the notebook's kernel) lives on, and
    the same run resumes from the store."""
    import os
    import subprocess
    import sys
    from tests.conftest import ROOT
    from tests.e2e.test_faults import TOY
    env = dict(os.environ, AXLE_JAX_CACHE_DIR=str(tmp_path / "cache"), AXLE_CPU_DEVICES="1")
    proc = subprocess.run([sys.executable, "-c", INTERRUPTED, *TOY, f"output.path={tmp_path}/w.zarr"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    import re
    saved = re.search(r"STOPPED: interrupted by SIGINT: (\d) of 3 chunk\(s\) are saved", out)
    assert saved and 1 <= int(saved.group(1)) < 3, out         # the written chunk kept, not the whole job
    assert f"{saved.group(1)} finished chunk(s) verified against their checksums" in out, out
    assert "STATUS: [0] 6" in out, out


def test_a_workbench_reuses_the_generated_program_for_changed_values(tmp_path, caplog):
    """The generated C reads the values at run time and holds only which
    are 0 or +-1: a job with a changed wheel load runs the kept program,
    equal to XLA's numbers for that load. (A value that becomes 0 is another
    pattern, another key: tests/sweep/codegen/test_codegen.py; the memory's
    rule of the latest pattern per structure: tests/sweep/test_workbench.py.)"""
    from sweep.workbench import Workbench
    s = Workbench()
    caplog.set_level(logging.INFO, logger="sweep")
    gen = (*TOY, "integrator.backend=generated")
    a = s.run(*gen, f"output.path={tmp_path}/a.zarr")
    caplog.clear()
    b = s.run(*gen, "loadcase.wheel_loads.left.fz=4100", f"output.path={tmp_path}/b.zarr")
    assert "kept in memory from an earlier job of this structure in this process; values are run-time inputs" \
        in caplog.text, caplog.text
    assert not np.allclose(a.wheel_centre_displacement, b.wheel_centre_displacement)
    x = s.run(*TOY, "integrator.backend=xla", "loadcase.wheel_loads.left.fz=4100", f"output.path={tmp_path}/x.zarr")
    for name in ("wheel_centre_displacement", "toe", "bushing_force"):
        want = np.asarray(x[name])
        assert np.max(np.abs(np.asarray(b[name]) - want)) <= 1e-10 * np.max(np.abs(want)), name
