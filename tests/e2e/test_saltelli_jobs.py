"""Saltelli designs as real jobs (``python -m sweep ... sweep=saltelli``) and
their Sobol' indices: a K&C job of the toy axle with a hardpoint, a
log-scaled and a linear parameter (the cube verifies, holds the design the
config defines, and its indices single out the parameter each metric is
made of), a bad ``sweep.n_base`` refused on the command line, and notebook
01's "Sensitivity indices" section on a Saltelli cube (on a cube that is
not one it runs its own K&C job: tests/e2e/test_sweep_jobs.py)."""
import os
import subprocess
import sys

import numpy as np
import pytest
import xarray as xr

from tests.conftest import ROOT
from tests.jobs import cfg_of

TOY_PARAMS = [
    "~sweep.parameters",
    "+sweep.parameters.rear_z.target=hardpoint", "+sweep.parameters.rear_z.points=[PR]",
    "+sweep.parameters.rear_z.axis=z", "+sweep.parameters.rear_z.bounds=[-0.01,0.01]",
    "+sweep.parameters.pivot_radial.target=bushing.stiffness",
    "+sweep.parameters.pivot_radial.elements=pivot_front_*", "+sweep.parameters.pivot_radial.directions=radial",
    "+sweep.parameters.pivot_radial.bounds=[0.5,2.0]", "+sweep.parameters.pivot_radial.scale=log",
    "+sweep.parameters.spring_rate.target=spring.rate", "+sweep.parameters.spring_rate.elements=spring_*",
    "+sweep.parameters.spring_rate.bounds=[0.85,1.15]",
]
KC = ["model=toy_trailing_arm", "loadcase=kc_wheel_travel", "loadcase.steps=3", "sweep=saltelli",
      "sweep.n_base=16", *TOY_PARAMS]
# the longitudinal step of the toy, 0.05 s around the step, two parameters
STEP_PARAMS = TOY_PARAMS[:1] + TOY_PARAMS[5:]
STEP = ["model=toy_trailing_arm", "loadcase.t_start=4.98", "loadcase.t_end=5.03", "output.every=5",
        "sweep.start=null", "sweep.every=null", "sweep.chunk_size=16", *STEP_PARAMS]


def _sweep(*args, env=None):
    return subprocess.run([sys.executable, "-m", "sweep", *args, "sweep.progress=false"], cwd=ROOT,
                          capture_output=True, text=True, timeout=900, env=env)


@pytest.fixture(scope="module")
def kc_saltelli(tmp_path_factory):
    path = tmp_path_factory.mktemp("saltelli") / "kc.zarr"
    job = _sweep(*KC, f"output.path={path}")
    assert job.returncode == 0, job.stderr[-3000:]
    return path


def test_a_saltelli_kc_job_verifies_and_its_indices_single_out_the_parameters(kc_saltelli):
    from omegaconf import OmegaConf

    from sweep.study.design import make_design
    from sweep.axle.builder import model_from_config
    from sweep.axle.params import build_parameters
    from sweep.sensitivity import sobol_indices
    check = subprocess.run([sys.executable, "-m", "sweep.verify", str(kc_saltelli)], cwd=ROOT,
                           capture_output=True, text=True, timeout=300)
    assert check.returncode == 0 and "ok" in check.stdout, check.stdout + check.stderr
    ds = xr.open_zarr(kc_saltelli)
    assert ds.sizes["variant"] == 16 * (2 * 3 + 2) and np.all(ds.status.values == 0)
    assert list(ds.attrs["parameters"]) == ["rear_z", "pivot_radial", "spring_rate"]
    # the cube holds the design its config defines, variant by variant
    cfg = cfg_of(*KC)
    sw = OmegaConf.to_container(cfg.sweep, resolve=True)
    X = make_design(sw, build_parameters(sw["parameters"], model_from_config(cfg.model)))
    np.testing.assert_array_equal(np.stack([ds[p].values for p in ds.attrs["parameters"]], 1), X)
    si = sobol_indices(kc_saltelli, ["bump_steer", "wheel_rate"], side="left")
    assert si.attrs["n_base"] == 16 and "S2" in si
    st = si.ST.to_pandas()
    # bump steer of a semi-trailing arm: the pivot axis' inclination (the rear point's height);
    # wheel rate: the spring
    assert st.loc["bump_steer", "rear_z"] > 0.5 and st.loc["bump_steer", ["pivot_radial", "spring_rate"]].max() < 0.1
    assert st.loc["wheel_rate", "spring_rate"] > 0.5 and st.loc["wheel_rate", ["rear_z", "pivot_radial"]].max() < 0.1


def test_a_bad_n_base_is_refused_on_the_command_line(tmp_path):
    job = _sweep(*[a for a in KC if a != "sweep.n_base=16"], "sweep.n_base=48", f"output.path={tmp_path / 'x.zarr'}")
    assert job.returncode == 2
    err = [line for line in (job.stdout + job.stderr).splitlines() if line.startswith("error")]
    assert len(err) == 1 and "sweep.n_base = 48 must be a power of 2" in err[0], job.stdout + job.stderr
    assert not (tmp_path / "x.zarr").exists()


def _notebook(cube, tmp_path, monkeypatch, saltelli_cube=None):
    import nbformat
    from nbclient import NotebookClient

    from tests.e2e.test_sweep_jobs import notebook_outputs
    nb = nbformat.read(os.path.join(ROOT, "notebooks", "01_result_cube.ipynb"), as_version=4)
    monkeypatch.setenv("AXLE_CUBE", str(cube))
    if saltelli_cube is not None:
        monkeypatch.setenv("AXLE_SALTELLI_CUBE", str(saltelli_cube))
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    text, png = notebook_outputs(nb)
    # the section's figure (its last picture), for a look
    import base64
    last = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if "image/png" in o.get("data", {})]
    (tmp_path / "sobol.png").write_bytes(base64.b64decode(last[-1]["data"]["image/png"]))
    return text, png


def _ranking_lines(si):
    lines = []
    for r in si.output.values:
        order = si.ST.sel(output=r).to_series().sort_values(ascending=False)
        lines.append(f"Sobol ranking (ST) {r}: " + " > ".join(f"{p} {v:.2f}" for p, v in order.items()))
    return lines


@pytest.fixture(scope="module")
def step_cubes(tmp_path_factory):
    """The toy's longitudinal step: a Saltelli design (N = 4, first order:
    16 variants)."""
    d = tmp_path_factory.mktemp("step")
    out = {}
    for name, design in (("saltelli", ["sweep=saltelli", "sweep.n_base=4", "sweep.calc_second_order=false"]),):
        job = _sweep(*STEP, *design, f"output.path={d / name}.zarr")
        assert job.returncode == 0, job.stderr[-3000:]
        out[name] = d / f"{name}.zarr"
    return out


@pytest.mark.notebook
def test_the_notebook_analyses_a_saltelli_cube_of_its_own_responses(step_cubes, tmp_path, monkeypatch):
    from sweep.sensitivity import sobol_indices
    text, png = _notebook(step_cubes["saltelli"], tmp_path, monkeypatch)
    assert png >= 3, "the notebook's figures are not in its outputs"
    ds = xr.open_zarr(step_cubes["saltelli"])
    ref = ds.attrs["reference_bushing_left"]
    si = sobol_indices(ds, {
        "peak_bushing_force": lambda c: abs(c.bushing_force.sel(bushing=ref, component="fx")
                                            .where(c.time >= 5.0)).max("time"),
        "settling_displacement": lambda c: c.wheel_centre_displacement.sel(side="left", axis="x").isel(time=-1)})
    for line in _ranking_lines(si):
        assert line in text, (line, text[-3000:])
    assert "python -m sweep" not in text          # no job of its own


# the notebook on a cube that is not a Saltelli cube (it runs a small Saltelli K&C job of
# its own): tests/e2e/test_sweep_jobs.py::test_notebook_executes_on_a_small_cube
