"""The error estimate in a job (full form, on demand): a too large step is flagged inaccurate, the nominal one not. CI's form: ROS34PW2's error estimate is of its embedded order (tests/kernels/test_methods_orders.py)."""
import numpy as np
import pytest
import kernels  # noqa: F401  (float64)
from tests.kernels.test_methods import EVENT_CASES, FAST_EVENT_CASES, keeps_its_order, METHODS, ORDER, _at_T, _run  # noqa: F401

pytestmark = pytest.mark.validation


def test_error_estimate_flags_a_too_large_step_and_not_the_nominal_one(tmp_path):
    """``integrator=ros34pw2``: the job with h = 1 ms is "ok" (status 0), the
    same job with h = 20 ms (far too coarse for the axle's modes; L-stable,
    so it stays finite) is flagged "inaccurate" (status 3) with its values
    kept; the toy axle keeps the compilations short."""
    import xarray as xr
    from tests.jobs import cfg_of
    from sweep.app import main
    common = ["model=toy_trailing_arm", "integrator=ros34pw2", "loadcase.t_start=4.9", "loadcase.t_end=5.3",
              "sweep.progress=false"]
    out = {}
    for dt in ("0.001", "0.02"):
        path = tmp_path / f"h{dt}.zarr"
        assert main(cfg_of(*common, f"integrator.dt={dt}", f"output.path={path}")) == 0
        out[dt] = xr.open_zarr(path)
    assert int(out["0.001"].status[0]) == 0
    assert int(out["0.02"].status[0]) == 3
    assert np.all(np.isfinite(out["0.02"].wheel_centre_displacement.values))   # values kept
    assert out["0.02"].status.attrs["flag_meanings"].split()[4] == "inaccurate"
