"""Bad command lines as real subprocesses (exit 2, one line), Hydra's own configuration errors, and a failing multirun job that does not stop its siblings."""
import pytest
from tests.sweep.test_inputs import CSV_ROWS, HEADER, TABLE, _assert_one_line, _overrides, cli, inputs  # noqa: F401


@pytest.mark.parametrize("args, key", [
    (["model.per_side.bodies.wheel.mass=heavy"], "model.per_side.bodies.wheel.mass"),
    (["integrator.relinearise_every=often"], "integrator.relinearise_every"),
    (["sweep=lhs", "sweep.every=0"], "sweep.every"),
    (["output.path=/proc/x/y.zarr"], "output.path"),
    ([*TABLE, "sweep.table={csv_long}"], "sweep.table"),
    (["+model.per_side.p2p.main_spring.seat_ofset=0.0189"], "model.per_side.p2p.main_spring.seat_ofset"),
])
def test_command_line_exits_2_with_one_line(args, key, inputs):
    files, out = inputs
    proc = cli(*_overrides(args, files, out), f"hydra.run.dir={out.parent}/hydra")
    assert proc.returncode == 2, proc.stderr
    _assert_one_line(proc.stderr, key, "")
    assert proc.stdout == ""
    assert not out.exists()
    # the error lands in the Hydra job log too
    log = (out.parent / "hydra" / "axle-sweep.log").read_text()
    assert f"error: {key}" in log


@pytest.mark.parametrize("args", [["model.nosuch_key=1"], ["model=nosuch_model"], ["loadcase=nosuch"]])
def test_hydra_configuration_errors_exit_2_like_the_projects(args, tmp_path):
    """Hydra rejects these before the app starts (its own message); the exit
    code is the project's one for a bad configuration, 2, not Hydra's 1."""
    proc = cli(*args, f"output.path={tmp_path}/out/c.zarr", f"hydra.run.dir={tmp_path}/hydra")
    assert proc.returncode == 2, proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("launcher", ["basic", "joblib"])
def test_failing_multirun_job_does_not_stop_its_siblings(tmp_path, launcher):
    """Both jobs run (each reports its own error), the multirun exits 2; with
    the joblib launcher the jobs run in worker processes (the failure reaches
    the parent through the marker files and the Hydra callback)."""
    proc = cli("--multirun", "integrator.relinearise_every=often,seldom", f"output.path={tmp_path}/out/c.zarr",
               f"hydra.sweep.dir={tmp_path}/multirun", f"hydra/launcher={launcher}")
    assert proc.returncode == 2, proc.stderr
    errors = sorted(ln for ln in proc.stderr.splitlines() if ln.startswith("error: integrator.relinearise_every"))
    assert len(errors) == 2 and "'often'" in errors[0] and "'seldom'" in errors[1], proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()
