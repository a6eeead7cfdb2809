"""Sweep jobs end to end: failure isolation, the public schema, SIGKILL and rerun, joblib / submitit shards, two devices, and the notebook on a small cube."""
import glob
import os
import signal
import subprocess
import sys
import numpy as np
import pytest
import xarray as xr
import zarr
from tests.jobs import cfg_of
from tests.conftest import CHECK_CUBE, ROOT
from tests.sweep.test_sweep import ONE_DEVICE, PARAMS, SHORT  # noqa: F401


@pytest.fixture(scope="module")
def failing_table(tmp_path_factory):
    """Four variants, the third with an absurd bushing softening that breaks its
    equilibrium (design.csv), and the same in reverse order (reversed.csv)."""
    d = tmp_path_factory.mktemp("fail")
    values = ["1.0", "0.7", "1e-12", "1.3"]
    (d / "design.csv").write_text("\n".join(["soft", *values]) + "\n")
    (d / "reversed.csv").write_text("\n".join(["soft", *values[::-1]]) + "\n")
    over = [*SHORT, "sweep=table", "sweep.chunk_size=4",
            "~sweep.parameters", "+sweep.parameters.soft.target=bushing.stiffness",
            "+sweep.parameters.soft.elements=*", "+sweep.parameters.soft.bounds=[1e-12,2.0]",
            "+sweep.parameters.soft.scale=log", "sweep.start=null", "sweep.every=null"]
    return d, over


def test_failing_variant_is_isolated_and_lanes_are_independent(failing_table):
    """A variant's values do not depend on its neighbours in the chunk nor on
    its lane: the same four variants in reverse order (the failing one in
    another lane, every variant beside others) give the same values to 1e-9
    - with the same compiled program (a chunk of 1 would be a second
    compilation of a minute or two)."""
    from sweep.app import main
    d, over = failing_table
    path = d / "chunk.zarr"
    assert main(cfg_of(*over, f"sweep.table={d / 'design.csv'}", f"output.path={path}"), progress=False) == 0
    ds = xr.open_zarr(path)
    assert list(ds.status.values) == [0, 0, 1, 0]
    assert np.all(np.isnan(ds.bushing_force.values[2]))
    assert np.all(np.isfinite(ds.bushing_force.values[[0, 1, 3]]))
    from sweep.results import schema as cube_schema
    assert cube_schema.check(path) == []                  # the project's own schema check
    rev = d / "reversed.zarr"
    assert main(cfg_of(*over, f"sweep.table={d / 'reversed.csv'}", f"output.path={rev}"), progress=False) == 0
    s = xr.open_zarr(rev)
    assert list(s.status.values) == [0, 1, 0, 0]
    for v in (0, 1, 3):
        for name in ("wheel_centre_displacement", "bushing_force", "toe"):
            a, b = ds[name].values[v], s[name].values[3 - v]
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9 * np.abs(b).max())
    # and they differ from each other (the parameters act)
    assert not np.allclose(ds.bushing_force.values[0], ds.bushing_force.values[1])


def _job(path, *extra):
    # the sweep with the tests' fault injection (tests/fault_sweep.py: python -m sweep without its variables)
    return [sys.executable, "-m", "tests.fault_sweep", *SHORT, *PARAMS, "sweep.n_variants=12",
            "sweep.chunk_size=2", "sweep.progress=false", f"output.path={path}", *extra]


@pytest.fixture(scope="module")
def reference_12(tmp_path_factory):
    """The uninterrupted single-process run that the other jobs must equal."""
    path = tmp_path_factory.mktemp("ref") / "ref.zarr"
    proc = subprocess.run(_job(path), cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env=dict(os.environ, **ONE_DEVICE))
    assert proc.returncode == 0, proc.stderr[-2000:]
    return path


@pytest.fixture(scope="module")
def ref12(reference_12):
    return xr.open_zarr(reference_12)


def _assert_same_cube(a, b, exact=True):
    for name in ("wheel_centre_displacement", "toe", "camber", "bushing_force", "status"):
        if exact:
            np.testing.assert_array_equal(a[name].values, b[name].values)
        else:
            np.testing.assert_allclose(a[name].values, b[name].values, rtol=1e-9,
                                       atol=1e-9 * float(np.nanmax(np.abs(b[name].values))))


def test_public_schema_check_passes(reference_12):
    """The published checker (../shared/tools/check_cube.py, outside this
    repository) accepts the cube; sweep.results.schema runs the same checks
    where it is absent."""
    if not os.path.exists(CHECK_CUBE):
        pytest.skip(f"{CHECK_CUBE} is not there (a clone without ../shared); sweep.results.schema checks instead")
    proc = subprocess.run([sys.executable, CHECK_CUBE, str(reference_12)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def test_sigkill_then_rerun_completes_without_loss(tmp_path, ref12):
    """SIGKILL after exactly two chunks (``AXLE_TEST_KILL_AFTER_CHUNKS``, no
    clock: however long compilation takes), then a rerun: nothing lost, the
    cube equals the uninterrupted one bitwise."""
    path = tmp_path / "killed.zarr"
    # one device like the reference, so that values are bitwise comparable
    # (chunks of 2 stay on one device by default anyway; this pins it
    # whatever sweep.engine.MIN_VARIANTS_PER_CPU_DEVICE is)
    env = dict(os.environ, **ONE_DEVICE, AXLE_TEST_KILL_AFTER_CHUNKS="2")
    env.pop("AXLE_TEST_KILL_SIGNAL", None)
    proc = subprocess.run(_job(path), cwd=ROOT, capture_output=True, text=True, env=env, timeout=3600)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    partial = xr.open_zarr(path)                  # opens after a SIGKILL
    flags = partial.chunk_done.values.astype(bool)
    assert list(flags) == [True, True, False, False, False, False]
    for k in np.nonzero(flags)[0]:                # every flagged chunk is complete
        sl = slice(2 * k, 2 * k + 2)
        assert np.all(partial.status.values[sl] == 0)
        np.testing.assert_array_equal(partial.bushing_force.values[sl], ref12.bushing_force.values[sl])
    env.pop("AXLE_TEST_KILL_AFTER_CHUNKS")
    rerun = subprocess.run(_job(path), cwd=ROOT, capture_output=True, text=True, timeout=3600, env=env)
    assert rerun.returncode == 0, rerun.stderr
    assert "2 finished chunk(s) verified" in rerun.stdout + rerun.stderr
    ds = xr.open_zarr(path)
    assert np.all(ds.chunk_done.values == 1) and list(ds.variant.values) == list(range(12))
    _assert_same_cube(ds, ref12)


def _two_shards(tmp_path, ref12, *launcher):
    """A --multirun of the two shards of one store with ``launcher``; the
    store equals the single run's. Same chunking -> same values; bitwise
    identity does not survive the workers' different XLA thread setup
    (round-off ~1e-16 abs)."""
    path = tmp_path / "sharded.zarr"
    cmd = _job(path, "sweep.num_shards=2", "sweep.shard=0,1", *launcher, f"hydra.sweep.dir={tmp_path}/multirun")
    cmd.insert(3, "--multirun")
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900,
                          env=dict(os.environ, **ONE_DEVICE))
    assert proc.returncode == 0, proc.stderr[-2000:]
    ds = xr.open_zarr(path)
    assert np.all(ds.chunk_done.values == 1)
    _assert_same_cube(ds, ref12, exact=False)


def test_joblib_multirun_two_shards_equal_single_run(tmp_path, ref12):
    _two_shards(tmp_path, ref12, "hydra/launcher=joblib", "hydra.launcher.n_jobs=2")


def test_submitit_local_multirun_two_shards_equal_single_run(tmp_path, ref12):
    """The cluster path: hydra/launcher=submitit_local (the local twin of
    submitit_slurm: each shard a submitit job in its own process) fills one
    store with two shards, like one process."""
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    _two_shards(tmp_path, ref12, "hydra/launcher=submitit_local", "hydra.launcher.timeout_min=30")
    logs = glob.glob(f"{tmp_path}/multirun/.submitit/*/*_log.out")
    assert len(logs) == 2, logs                      # two submitit jobs, one per shard


def test_two_devices_shard_a_chunk_like_one_device(tmp_path, ref12):
    path = tmp_path / "devices.zarr"
    env = dict(os.environ, XLA_FLAGS=f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=2")
    proc = subprocess.run(_job(path), cwd=ROOT, capture_output=True, text=True, timeout=900, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "on 2 device(s)" in proc.stdout
    _assert_same_cube(xr.open_zarr(path), ref12, exact=False)


def notebook_outputs(nb):
    """(text of every stream / text output, number of image/png outputs) of an executed notebook."""
    text, png = [], 0
    for c in nb.cells:
        if c.cell_type != "code":
            continue
        for o in c.outputs:
            text.append(o.get("text", "") or o.get("data", {}).get("text/plain", ""))
            png += "image/png" in o.get("data", {})
    return "".join(text), png


def sensitivity_ranking(path):
    """Parameters ranked by |Spearman rho| with the peak |fx| of the left
    reference bushing after the step and with the final longitudinal
    wheel-centre displacement (ok variants), straight from the cube."""
    from scipy.stats import spearmanr
    z = zarr.open_group(str(path), mode="r")
    status = z["status"][:]
    good = np.flatnonzero(status == 0)
    t = z["time"][:]
    bushings = [str(b) for b in z["bushing"][:]]
    ref = z.attrs["reference_bushing_left"]
    fx = z["bushing_force"][:, :, bushings.index(ref), 0][good]
    resp = {"peak_bushing_force": np.abs(fx[:, t >= 5.0]).max(axis=1),
            "settling_displacement": z["wheel_centre_displacement"][:, -1, 0, 0][good]}
    params = list(z.attrs["parameters"])
    out = {}
    for r, y in resp.items():
        rho = [spearmanr(z[p][:][good], y).statistic for p in params]
        order = sorted(range(len(params)), key=lambda i: -abs(np.nan_to_num(rho[i])))
        out[r] = [params[i] for i in order]
    return out


@pytest.mark.notebook
def test_notebook_executes_on_a_small_cube(reference_12, tmp_path, monkeypatch):
    """notebooks/01_result_cube.ipynb runs top to bottom on a small cube (path
    from AXLE_CUBE), shows its figures, and ranks the parameters exactly as a
    direct computation from the cube does."""
    import nbformat
    from nbclient import NotebookClient
    nb = nbformat.read(os.path.join(ROOT, "notebooks", "01_result_cube.ipynb"), as_version=4)
    monkeypatch.setenv("AXLE_CUBE", str(reference_12))
    own = tmp_path / "own_saltelli.zarr"
    monkeypatch.setenv("AXLE_SALTELLI_CUBE", str(own))
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    text, png = notebook_outputs(nb)
    assert png >= 2, "the notebook's figures are not in its outputs"
    expected = sensitivity_ranking(reference_12)
    assert len(expected["peak_bushing_force"]) >= 2
    for r, ranking in expected.items():
        assert f"ranking {r}: " + " > ".join(ranking) in text, (r, ranking, text[-2000:])
    # its last section: not a Saltelli cube, so it runs a small Saltelli K&C
    # job of its own and shows its Sobol indices (tests/e2e/test_saltelli_jobs.py)
    from sweep.sensitivity import sobol_indices
    from tests.e2e.test_saltelli_jobs import _ranking_lines
    assert "python -m sweep model=double_wishbone loadcase=kc_wheel_travel" in text and "status: ok 160" in text
    si = sobol_indices(own, ["bump_steer", "wheel_rate"], side="left")
    for line in _ranking_lines(si):
        assert line in text, (line, text[-3000:])
    st = si.ST.to_pandas()
    assert st.loc["bump_steer", ["tie_rod_outer_z", "tie_rod_inner_z"]].min() > 0.2 > st.loc["bump_steer", "spring_rate"]
    assert st.loc["wheel_rate", "spring_rate"] > 0.5
