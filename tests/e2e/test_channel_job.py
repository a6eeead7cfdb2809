"""A channel added to the table reaches the cube of a job with its dims, units and long name (LSRT2 and the Radau reference path)."""
import numpy as np
import pytest
import xarray as xr
from tests.jobs import cfg_of
from tests.sweep.kinds.test_channels import TOY, _wheel_centre_height, extra_channel  # noqa: F401


@pytest.mark.parametrize("integrator", ["lsrt2", "radau"])
def test_a_channel_added_to_the_table_is_in_the_cube_with_its_units(extra_channel, tmp_path, integrator):
    from sweep import app
    path = tmp_path / f"{integrator}.zarr"
    over = [*TOY, f"output.path={path}", f"integrator={integrator}", "output.every=10"]
    if integrator == "radau":
        over.append("loadcase.t_end=5.0")
    assert app.main(cfg_of(*over), progress=False) == 0
    ds = xr.open_zarr(path)
    da = ds["wheel_centre_height"]
    assert da.dims == ("variant", "time", "side")
    assert da.attrs["units"] == "m" and "wheel-centre height" in da.attrs["long_name"]
    # independent of the new channel's own code path: it moves exactly as the
    # stored vertical wheel-centre displacement does (which is measured from
    # the static equilibrium the run starts in)
    h = da.isel(variant=0).values
    dz = ds.wheel_centre_displacement.isel(variant=0).sel(axis="z").values
    np.testing.assert_allclose(h - h[0], dz, atol=1e-12)
    assert np.all(np.abs(h[0]) > 1e-2)                 # a height (toy axle: ~42 mm), not a displacement
    # the existing channels are untouched and the public schema still holds
    from sweep.results import schema as cube_schema
    assert cube_schema.check(str(path)) == []
