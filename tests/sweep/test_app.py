"""The Hydra app: bad configs and unknown keys fail in one line before anything is computed."""
import pytest
from tests.jobs import cfg_of, cli
from tests.e2e.test_app import SHORT  # noqa: F401


def test_unknown_config_key_fails_before_compute(tmp_path):
    """A misspelt key is Hydra's composition error (its message naming the
    key; exit code 2, the project's code for a bad configuration), raised
    before anything is built: no compile, no cube."""
    out = tmp_path / "c.zarr"
    proc = cli("integrator.relinearize_every=2", f"output.path={out}", f"hydra.run.dir={tmp_path}/hydra")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Could not override 'integrator.relinearize_every'" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and "compile" not in proc.stdout
    assert not out.exists()


@pytest.mark.parametrize("override, message", [
    ("output.path=outputs/x.nc", "must end in .zarr"),
    ("integrator.dt=0.0007", "integrator.dt = 0.0007: does not divide the load case duration 0.1 s"),
    ("loadcase.wheel_loads.left.fq=1", "loadcase.wheel_loads.left.fq: unknown load channel"),
])
def test_bad_values_give_one_line_errors(override, message, capsys, tmp_path):
    from sweep.app import main
    path = [] if override.startswith("output.path") else [f"output.path={tmp_path}/c.zarr"]
    cfg = cfg_of(*SHORT, override, *path) if "fq" not in override else cfg_of(*SHORT, "+" + override, *path)
    assert main(cfg) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
