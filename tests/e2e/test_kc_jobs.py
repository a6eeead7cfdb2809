"""The K&C load cases as sweep jobs: the cube, its units, failure isolation, a rerun that is a no-op."""
import os
import numpy as np
import pytest
import xarray as xr
import kernels  # noqa: F401  (float64)
from kernels import kc
from tests.kernels.test_kc import _kc_cfg, toy_direct  # noqa: F401


@pytest.fixture(scope="module")
def kc_cube(tmp_path_factory):
    """Four variants of the travel load case, the third with an absurd bushing
    softening that breaks its equilibrium; run through the pipeline (sweep.engine.run)."""
    d = tmp_path_factory.mktemp("kc")
    csv = d / "design.csv"
    csv.write_text("\n".join(["soft", "1.0", "0.7", "1e-12", "1.3"]) + "\n")
    path = d / "travel.zarr"
    over = ["loadcase=kc_wheel_travel", "loadcase.travel=[-0.04,0.04]", "loadcase.steps=5",
            "sweep=table", f"sweep.table={csv}", "sweep.chunk_size=4", "~sweep.parameters",
            "+sweep.parameters.soft.target=bushing.stiffness", "+sweep.parameters.soft.elements=*",
            "+sweep.parameters.soft.bounds=[1e-12,2.0]", "+sweep.parameters.soft.scale=log",
            f"output.path={path}"]
    from omegaconf import OmegaConf
    from sweep import engine
    from sweep.kinds import kind_of
    cfg = _kc_cfg(*over)
    summary = engine.run(kind_of(cfg), cfg, OmegaConf.to_yaml(cfg), progress=False)   # kind from loadcase.kind
    assert summary["kind"] == "kc" and summary["variants_run"] == 4
    return path, over


def test_kc_sweep_writes_a_cube_with_units_and_isolates_failures(kc_cube, toy_direct):
    path, _ = kc_cube
    ds = xr.open_zarr(path)
    assert list(ds.status.values) == [0, 0, 1, 0]
    assert ds.attrs["cube_kind"] == "kc" and ds.status.attrs["flag_meanings"].split()[5] == "load_step_failed"
    assert ds.sizes["travel"] == 5 and list(ds.side.values) == ["left", "right"]
    np.testing.assert_allclose(ds.travel.values, np.linspace(-0.04, 0.04, 5))
    assert ds.travel.attrs["units"] == "m"
    from sweep.kinds.kinematics_compliance import parseable_units
    for name, (units, _) in kc.METRICS.items():
        assert ds[name].attrs["units"] == parseable_units(units) and ds[name].dims == ("variant", "side")
    assert ds.compliance_matrix.dims == ("variant", "side", "dof", "component")
    assert ds.attrs["brake_locked_bushings"] == ["wheel_bearing_left", "wheel_bearing_right"]
    assert np.all(np.isnan(ds.toe.values[2])) and np.all(np.isnan(ds.wheel_rate.values[2]))
    ok = [0, 1, 3]
    assert np.all(np.isfinite(ds.toe.values[ok])) and np.all(ds.converged.values[ok] == 1)
    # variant 0 is the nominal axle: its metrics equal the direct kernel run
    for name in kc.METRICS:
        # (atol: the toy has no anti-roll bar, its bar rate is a difference of equal rates, ~1e-15)
        np.testing.assert_allclose(ds[name].values[0], toy_direct[name], rtol=1e-9, atol=1e-9, err_msg=name)
    np.testing.assert_allclose(ds.compliance_matrix.values[0], toy_direct["compliance_matrix"], rtol=1e-9)
    # the travel curve: 0 is the design position, the wheel centre follows the
    # prescribed height, the wheel load rises with bump
    i0 = int(np.argmin(np.abs(ds.travel.values)))
    np.testing.assert_allclose(ds.wheel_centre_displacement.values[0, i0], 0.0, atol=1e-12)
    np.testing.assert_allclose(ds.wheel_centre_displacement.sel(axis="z").values[0, :, 0],
                               ds.travel.values, atol=1e-10)
    fz = ds.wheel_load.sel(component="fz").values[0, :, 0]
    assert np.all(np.diff(fz) > 0)
    np.testing.assert_allclose(fz[i0], toy_direct["design_wheel_load"][0], rtol=1e-9)
    # the stiffness parameter acts: stiffer bushings -> smaller longitudinal compliance
    lc = ds.longitudinal_compliance.values[:, 0]
    assert lc[3] < lc[0] < lc[1]
    np.testing.assert_allclose(ds.soft.values, [1.0, 0.7, 1e-12, 1.3])


def test_kc_rerun_is_a_no_op_and_bad_config_is_one_line(kc_cube, capsys, tmp_path):
    from sweep.app import main
    path, over = kc_cube
    before = xr.open_zarr(path).toe.values.copy()
    capsys.readouterr()
    # python -m sweep with a K&C load case: same job, nothing left to run, K&C summary
    assert main(_kc_cfg(*over), progress=False) == 0
    out = capsys.readouterr().out
    assert "nothing to run" in out and "K&C metrics of variant 0" in out, out
    np.testing.assert_array_equal(xr.open_zarr(path).toe.values, before)
    for bad, msg in (("loadcase.mode=diagonal", "loadcase.mode = 'diagonal' is not one of parallel, opposite"),
                     ("loadcase.steps=0", "loadcase.steps = 0 must be >= 1"),
                     ("loadcase.loaded_radius=-0.3", "loadcase.loaded_radius = -0.3 must be > 0"),
                     ("+loadcase.travle=[0,1]", "loadcase.travle: unknown key")):
        cfg = _kc_cfg("loadcase=kc_wheel_travel", bad, f"output.path={tmp_path}/x.zarr")
        assert main(cfg, progress=False) == 2
        err = capsys.readouterr().err.strip()
        assert msg in err and len(err.splitlines()) == 1, err
        assert not os.path.exists(tmp_path / "x.zarr")
