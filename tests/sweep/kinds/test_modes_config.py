"""A modes load case with bad values is one line before compute."""
import pytest
from tests.jobs import cfg_of
from tests.e2e.test_modes_job import TOY  # noqa: F401


@pytest.mark.parametrize("over, key", [("loadcase.n_modes=0", "loadcase.n_modes = 0"),
                                       ("loadcase.n_modes=99", "loadcase.n_modes = 99"),
                                       ("+loadcase.travel=[0,1]", "loadcase.travel: unknown key")])
def test_bad_modes_load_case_is_one_line(over, key, tmp_path, capsys):
    from sweep import app
    cfg = cfg_of(*TOY, over, f"output.path={tmp_path}/x.zarr")
    assert app.main(cfg, progress=False) == 2
    err = capsys.readouterr().err
    assert key in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.zarr").exists()
