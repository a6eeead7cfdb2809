"""The Hydra app end to end: cube schema, summary, rerun and bad-config behaviour."""
import os
import subprocess
import sys

import numpy as np
import pytest
import xarray as xr

from tests.conftest import CHECK_CUBE, ROOT
from tests.jobs import cfg_of, cli

SHORT = ["loadcase.t_start=4.95", "loadcase.t_end=5.05"]


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("cube") / "lsrt2.zarr"
    proc = cli(*SHORT, f"output.path={out}")
    return proc, out


def test_cli_writes_a_valid_cube_and_summary(cli_run):
    proc, out = cli_run
    assert proc.returncode == 0, proc.stderr
    for text in ("24 bodies, 55 force elements, 144 DOF", "real-time factor", "compile", str(out)):
        assert text in proc.stdout
    if "AXLE_CPU_DEVICES" not in os.environ and "device_count" not in os.environ.get("XLA_FLAGS", ""):
        # default CPU devices: the single variant is not split (nor padded) over them
        assert "1 variant(s) per chunk on 1 CPU device" in proc.stdout, proc.stdout
    from sweep.results import schema as cube_schema
    assert cube_schema.check(str(out)) == []
    if os.path.exists(CHECK_CUBE):       # the public checker, where ../shared is beside the clone
        check = subprocess.run([sys.executable, CHECK_CUBE, str(out)], capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
    ds = xr.open_zarr(out)
    assert ds.sizes["time"] == 101 and list(ds.variant.values) == [0]
    np.testing.assert_allclose(ds.time.values[[0, -1]], [4.95, 5.05])
    assert ds.attrs["reference_bushing_left"] == "longitudinal_link_body_left"
    assert "relinearise_every: 1" in ds.attrs["config"] and ds.attrs["git_revision"]
    assert int(ds.status[0]) == 0
    # at rest in equilibrium before the step, moving after it
    wcd = ds.wheel_centre_displacement.isel(variant=0).sel(axis="x")
    assert float(abs(wcd.sel(time=slice(4.95, 4.999))).max()) < 1e-12
    assert float(wcd.isel(time=-1).sel(side="left")) < -1e-4


def test_cube_equals_direct_kernel_run(cli_run, dw_model, step_excitation, dw_equilibrium):
    from kernels.response import Options, Problem, solve
    _, out = cli_run
    ds = xr.open_zarr(out)
    direct = solve(Problem(dw_model, step_excitation, 4.95, 0.001), Options(n_samples=101, every=1, relinearise_every=1), dw_equilibrium.r)
    np.testing.assert_allclose(ds.bushing_force.values[0], direct["bushing_force"], rtol=1e-9, atol=1e-6)
    np.testing.assert_allclose(ds.toe.values[0], direct["toe"], rtol=1e-9, atol=1e-12)


def test_rerun_same_config_keeps_cube_and_other_config_is_refused(cli_run):
    from sweep.app import main
    _, out = cli_run
    before = xr.open_zarr(out).bushing_force.values.copy()
    assert main(cfg_of(*SHORT, f"output.path={out}")) == 0
    np.testing.assert_array_equal(xr.open_zarr(out).bushing_force.values, before)
    proc = cli(*SHORT, "integrator.relinearise_every=2", f"output.path={out}")
    assert proc.returncode == 2
    assert "output.path" in proc.stderr and "another config" in proc.stderr
    np.testing.assert_array_equal(xr.open_zarr(out).bushing_force.values, before)


def test_reference_beside_gives_nmse_summary(cli_run, capsys):
    from sweep.app import main
    _, out = cli_run
    ref = os.path.join(os.path.dirname(out), "radau.zarr")
    assert main(cfg_of(*SHORT, "integrator=radau", f"output.path={ref}")) == 0
    text = capsys.readouterr().out
    assert "NMSE of lsrt2 against radau" in text and "published for LSRT2: 0.00243" in text
    # the printed values are the NMSE of the two cubes, computed here from the cubes themselves
    import re
    test, refd = xr.open_zarr(out), xr.open_zarr(ref)
    w = (test.time.values >= 4.9) & (test.time.values <= 6.0)
    x = test.wheel_centre_displacement.sel(axis="x").values[0][w]          # (time, side)
    x_ref = refd.wheel_centre_displacement.sel(axis="x").values[0][w]
    expected = float(np.mean((x - x_ref) ** 2) / np.mean(x_ref) ** 2)
    printed = float(re.search(r"wheel_displacement: (\S+)", text).group(1))
    assert printed == pytest.approx(expected, rel=1e-3)
    assert printed > 0


def test_twist_beam_lhs_job_with_a_flexible_cross_member(tmp_path):
    """The job pipeline on a model with a flexible body: a 2-variant lhs of
    the twist beam's modes (pivot bushings, cross-member stiffness and
    damping) runs, every variant ok, the cube passes the public schema with
    its modal coordinates counted (n_dof = 6 n_bodies + n_modal_coordinates),
    and the cross member's modes are among the axle's. (The modes kind:
    its program compiles in half the time of the time response's.)"""
    out = tmp_path / "modes.zarr"
    proc = cli("model=twist_beam", "loadcase=modes", "sweep=lhs_twist_beam", "sweep.n_variants=2",
               f"output.path={out}")
    assert proc.returncode == 0, proc.stderr
    assert "5 bodies (and 12 modal coordinates of flexible bodies), 14 force elements, 42 DOF" in proc.stdout
    from sweep.results import schema as cube_schema
    assert cube_schema.check(str(out)) == []
    if os.path.exists(CHECK_CUBE):
        check = subprocess.run([sys.executable, CHECK_CUBE, str(out)], capture_output=True, text=True)
        assert check.returncode == 0, check.stdout + check.stderr
    ds = xr.open_zarr(out)
    assert (ds.attrs["n_bodies"], ds.attrs["n_modal_coordinates"], ds.attrs["n_dof"]) == (5, 12, 42)
    assert np.all(ds.status.values == 0) and ds.sizes["variant"] == 2
    assert "cross_member_stiffness" in ds
    # a mode carried by the cross member's modal coordinates, and the variants differ
    energy = ds.body_energy.sel(body=["cross_member.modes_0", "cross_member.modes_1"]).sum("body")
    assert float(energy.max()) > 0.5
    assert np.ptp(ds.frequency.isel(mode=2).values) > 1e-3


def test_default_job_runs_the_generated_code(tmp_path):
    """integrator.backend's default (auto) on a CPU with a C compiler: a job
    long enough to pay for the build integrates as generated C (its log
    line), every variant ok, the values plausible. (The generated code
    against XLA: tests/e2e/test_prebuild.py, tests/sweep/engine/test_values_numbers.py
    and tests/sweep/codegen/.) Without a compiler, auto says so in one line
    and runs on XLA."""
    from sweep.codegen import build
    # long enough for auto to build the C (sweep.codegen.runner.GENERATED_MIN_VARIANT_STEPS)
    toy = ["model=toy_trailing_arm", "loadcase.t_start=0.0", "loadcase.t_end=61.0", "output.every=100"]
    env = {k: v for k, v in os.environ.items() if k != "AXLE_AUTO_BACKEND"}
    out = tmp_path / "auto.zarr"
    run = subprocess.run([sys.executable, "-m", "sweep", *toy, f"output.path={out}", f"hydra.run.dir={tmp_path}/h"],
                         cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    auto = run.stdout + run.stderr
    if build.compiler() is None:
        assert "integrator.backend=auto: no C compiler found" in auto
    else:
        assert "generated backend (" in auto and "on generated C" in auto and "in the background" not in auto
    a = xr.open_zarr(out)
    assert int(a.status[0]) == 0
    # the step at 5 s moves the wheel back and it settles: a finite, nonzero response
    dx = a.wheel_centre_displacement.sel(axis="x").values[0, :, 0]
    assert np.isfinite(dx).all() and 1e-4 < abs(dx[-1]) < 0.05
