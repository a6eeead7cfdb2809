"""Jobs say why a model is physically wrong (python -m sweep): a spring that
cannot hold the load gives status implausible_static_state with the reason
(values kept, exit 0), an axle with a
direction no element restrains fails with that direction and its bodies
named (exit 1: every variant failed)."""
import numpy as np
import xarray as xr

from tests.jobs import cli

SHORT = ["model=toy_trailing_arm", "loadcase.t_start=4.98", "loadcase.t_end=5.0"]
SOFT = "model.per_side.p2p.spring.stiffness=2000.0"      # 2 N/mm: cannot hold the toy's 5 kN


def test_a_spring_that_cannot_hold_the_load_is_implausible_with_the_reason(tmp_path):
    run = cli(*SHORT, SOFT, f"output.path={tmp_path}/soft.zarr", f"hydra.run.dir={tmp_path}/h1")
    log = run.stdout + run.stderr
    assert run.returncode == 0, log[-3000:]
    assert "status: ok 0, implausible_static_state 1" in log
    assert "variant 0: implausible static state" in log and "camber" in log and "checks.alignment_change_deg" in log
    ds = xr.open_zarr(tmp_path / "soft.zarr")
    assert int(ds.status.values[0]) == 5 and np.isfinite(ds.toe.values).all()      # values kept
    assert "implausible_static_state" in ds.status.attrs["flag_meanings"]
    # (wider limits from the job's checks section: tests/sweep/axle/test_diagnose.py)


def test_an_unrestrained_direction_is_named_when_the_equilibrium_fails(tmp_path):
    free = "model.bushing_types.wheel_bearing.stiffness=[2.0e+8,2.0e+8,1.0e+8,5.0e+4,5.0e+4,0.0]"
    run = cli(*SHORT, free, f"output.path={tmp_path}/free.zarr", f"hydra.run.dir={tmp_path}/h")
    log = run.stdout + run.stderr
    assert run.returncode == 1, log[-3000:]
    assert "held by no element" in log
    assert "unrestrained: wheel_left rotation about" in log and "unrestrained: wheel_right rotation about" in log
    assert "error: every variant failed" in log
