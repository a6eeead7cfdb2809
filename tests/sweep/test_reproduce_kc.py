"""A K&C cube's parameters reproduce its results (the oracle and the
helpers: tests/sweep/test_reproduce.py, the resumed time-response cube;
both run in the slow tier of CI, the fast tier checks the order without
compute: tests/sweep/engine/test_stream_order.py)."""
import pytest
import xarray as xr

from tests.sweep.test_reproduce import C, KC, TOY, assert_reproduced, replay, run_in_process

pytestmark = pytest.mark.slow


def test_kc_cube_parameters_reproduce_its_results(tmp_path):
    """A K&C wheel-travel cube (the travel curves, every design-position
    metric, the compliance matrix) of 7 variants in chunks of 4, the last
    padded. Replayed: the first and last variant of each chunk."""
    path = tmp_path / "kc.zarr"
    s = run_in_process(*TOY, *KC, "sweep.n_variants=7", f"output.path={path}")
    assert (s["kind"], s["chunk"], s["n_chunks"]) == ("kc", C, 2), s
    ds = xr.load_dataset(path, engine="zarr")
    assert {"compliance_matrix", "wheel_load", "converged"} <= set(ds.data_vars)
    variants = [0, 3, 4, 6]
    assert_reproduced(ds, variants, replay(ds, variants, [*TOY, *KC], tmp_path))
