"""Hardpoint sweeps as jobs (python -m sweep): one compile for the whole
design, every variant its own geometry, and the answers of a model file
with the point moved by hand.

The K&C job moves the toy's rear bushing point in z on a three-level grid:
the nominal level equals the nominal job, bump steer changes monotonically
with the offset, and the moved level equals the job of the hand-moved
model file (every channel and metric). The time-response design on the
generated C (each variant's geometry read at run time) equals XLA's."""
import numpy as np
import xarray as xr

from tests.jobs import cli

KC = ["model=toy_trailing_arm", "loadcase=kc_wheel_travel", "loadcase.steps=5", "sweep=grid", "sweep.levels=3",
      "sweep.start=null", "sweep.every=null", "~sweep.parameters",
      "+sweep.parameters.rear_z={target: hardpoint, points: [PR], axis: z, bounds: [-0.01, 0.01]}"]


def test_kc_hardpoint_grid_compiles_once_and_equals_the_moved_model(tmp_path):
    out = tmp_path / "hp.zarr"
    run = cli(*KC, f"output.path={out}", f"hydra.run.dir={tmp_path}/h1")
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-3000:]
    assert log.count("compiling K&C chunk runner") == 1
    ds = xr.open_zarr(out)
    assert list(ds.status.values) == [0, 0, 0]
    np.testing.assert_allclose(ds.rear_z.values, [-0.01, 0.0, 0.01])
    bump = ds.bump_steer.values[:, 0]
    assert np.all(np.diff(bump) > 0) or np.all(np.diff(bump) < 0), bump
    assert abs(bump[2] - bump[0]) > 0.1            # deg/m: the tie-rod-like effect of a bushing height
    # the +10 mm level against the job of the model file with PR moved by hand
    pr = [0.05, 0.4, -0.02 + 0.01]
    ref = tmp_path / "ref.zarr"
    # (the same design on the hand-moved file, its middle level - offset 0 -
    # the reference: the second job reuses the first one's compiled program,
    # its values from the file)
    hand = cli(*KC, f"model.hardpoints.PR=[{pr[0]!r},{pr[1]!r},{pr[2]!r}]", f"output.path={ref}",
               f"hydra.run.dir={tmp_path}/h2")
    assert hand.returncode == 0, (hand.stdout + hand.stderr)[-3000:]
    assert "reused" in hand.stdout + hand.stderr
    r = xr.open_zarr(ref)
    assert r.rear_z.values[1] == 0.0
    for name, var in r.data_vars.items():
        if var.dtype.kind != "f" or "variant" not in var.dims or name == "rear_z":
            continue
        a, b = ds[name].values[2], var.values[1]
        scale = max(float(np.nanmax(np.abs(b))) if np.isfinite(b).any() else 0.0, 1e-300)
        np.testing.assert_array_equal(np.isnan(a), np.isnan(b), err_msg=name)
        assert np.nanmax(np.abs(a - b), initial=0.0) <= 1e-9 * scale, name


def test_time_response_hardpoint_sweep_on_generated_code_equals_xla(tmp_path):
    over = ["model=toy_trailing_arm", "loadcase.t_start=4.98", "loadcase.t_end=5.02", "sweep=grid",
            "sweep.levels=2", "sweep.start=null", "sweep.every=null", "~sweep.parameters",
            "+sweep.parameters.spring_seat={target: hardpoint, points: [SC], axis: z, bounds: [-0.01, 0.01]}"]
    out = tmp_path / "t.zarr"
    run = cli(*over, f"output.path={out}", f"hydra.run.dir={tmp_path}/h1")
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-3000:]
    ds = xr.open_zarr(out)
    assert list(ds.status.values) == [0, 0]
    # the spring's line of action moved: the static bushing forces differ (N)
    f = ds.bushing_force.sel(bushing="pivot_front_left").values[:, 0]
    assert np.max(np.abs(f[1] - f[0])) > 1.0, f
    # the generated C reads each variant's geometry: XLA's numbers to 1e-10
    gen = cli(*over, "integrator.backend=generated", f"output.path={tmp_path}/g.zarr",
              f"hydra.run.dir={tmp_path}/h2")
    glog = gen.stdout + gen.stderr
    assert gen.returncode == 0, glog[-3000:]
    assert "generated backend (" in glog and "each variant's geometry read at run time" in glog
    # a rerun into a new path reuses the code, which reads the values (it does not hold them)
    again = cli(*over, "integrator.backend=generated", f"output.path={tmp_path}/g2.zarr",
                f"hydra.run.dir={tmp_path}/h3")
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    assert "reused: the generated code of an earlier run of this structure; values are run-time inputs" in \
        again.stdout + again.stderr
    g = xr.open_zarr(tmp_path / "g.zarr")
    assert list(g.status.values) == [0, 0]
    for name, var in ds.data_vars.items():
        if var.dtype.kind != "f" or "variant" not in var.dims:
            continue
        a, b = g[name].values, var.values
        scale = max(float(np.nanmax(np.abs(b))), 1e-300)
        np.testing.assert_array_equal(np.isnan(a), np.isnan(b), err_msg=name)
        assert np.nanmax(np.abs(a - b), initial=0.0) <= 1e-10 * scale, name
