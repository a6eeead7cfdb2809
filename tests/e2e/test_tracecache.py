"""Trace cache (sweep/core/tracecache.py): a rerun of the same job loads the traced
chunk runner instead of tracing it, with bitwise-equal results (the key
holds the structure, not the values: tests/sweep/engine/test_values.py)."""
import os
import subprocess
import sys

import numpy as np
import pytest
import xarray as xr

from tests.conftest import ROOT

TOY = ["model=toy_trailing_arm", "loadcase.t_end=5.2", "sweep.start=4.9", "sweep.progress=false"]


def _job(tmp_path, cache, *extra):
    env = dict(os.environ, AXLE_JAX_CACHE_DIR=str(cache))
    proc = subprocess.run([sys.executable, "-m", "sweep", *TOY, *extra], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_rerun_loads_the_traced_runner_with_equal_results(tmp_path):
    cache = tmp_path / "cache"
    first = _job(tmp_path, cache, f"output.path={tmp_path}/a.zarr")
    assert "reused: the traced program" not in first
    programs = [n for n in os.listdir(cache / "axle-traces") if n.endswith(".jaxexport")]
    assert len(programs) == 1          # (beside it: the memoised start-up values, tracecache.memo)
    second = _job(tmp_path, cache, f"output.path={tmp_path}/b.zarr")
    assert "reused: the traced program of an earlier run of this structure" in second, second
    plain = _job(tmp_path, cache, f"output.path={tmp_path}/c.zarr", "cache.enabled=false")
    assert "reused: the traced program" not in plain
    a, b, c = (xr.open_zarr(tmp_path / f"{n}.zarr") for n in "abc")
    for name in ("wheel_centre_displacement", "toe", "bushing_force"):
        # the first run compiles the deserialised program as the rerun does: bitwise equal
        np.testing.assert_array_equal(a[name].values, b[name].values)
        # without the cache the program is traced directly: equal to round-off - bitwise with
        # XLA's MLIR fusion emitters; the elemental emitter the tests compile with orders some
        # operations of the two programs differently (measured 2e-11 of the largest bushing
        # force, the stiff solve amplifying it; 1e-10 is the rule for two compilations)
        want = c[name].values
        assert np.max(np.abs(a[name].values - want)) <= 1e-10 * np.max(np.abs(want)), name
    # a damaged entry is traced again (warning), not a failure
    entry = cache / "axle-traces" / programs[0]
    entry.write_bytes(b"not a program")
    third = _job(tmp_path, cache, f"output.path={tmp_path}/d.zarr")
    assert "reused: the traced program" not in third
    np.testing.assert_array_equal(a.toe.values, xr.open_zarr(tmp_path / "d.zarr").toe.values)
