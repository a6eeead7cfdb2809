"""The sweep engine: designs, parameters, failure isolation, resume, shards, devices."""
import glob
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
import xarray as xr
import zarr
from omegaconf import OmegaConf

from kernels.model import ModelError
from tests.e2e.test_app import cfg_of
from tests.conftest import CHECK_CUBE, ROOT

# a short window around the step keeps compile and run small
SHORT = ["loadcase.t_start=4.98", "loadcase.t_end=5.03", "output.every=5"]
PARAMS = ["sweep=lhs", "sweep.start=null", "sweep.every=null"]


def _design(*over):
    from sweep.design import make_design
    from sweep.model_builder import model_from_config
    from sweep.params import build_parameters
    cfg = cfg_of(*PARAMS, *over)
    sw = OmegaConf.to_container(cfg.sweep, resolve=True)
    model = model_from_config(cfg.model)
    pset = build_parameters(sw["parameters"], model)
    return make_design(sw, pset), pset


def test_auto_chunk_follows_the_memory_budget_and_the_platform_cap():
    """Auto chunk = budget / per-variant bytes, capped per device where
    throughput stops growing (256 on a CPU), a multiple of the device count,
    never more than the design."""
    from sweep.engine.layout import output_bytes
    from sweep.engine.mapping import estimate_chunk
    from sweep.kinds.time_response import CHANNELS
    # 111 samples of wheel-centre displacement (2 x 3), toe, camber (2 each)
    # and 2 bushings x 6 components: 22 float64 per sample
    shapes = {"wheel_centre_displacement": (2, 3), "toe": (2,), "camber": (2,), "bushing_force": (2, 6)}
    out = output_bytes(CHANNELS, shapes, 111)
    assert out == 8 * 111 * 22
    c, per = estimate_chunk(4096, out, 144, 2.0, 1, platform="cpu")
    assert c == 256 and per == 8 * 111 * 22 + 8 * 144 * 144 * 12
    c, _ = estimate_chunk(4096, out, 144, 2.0, 2, platform="cpu")
    assert c == 512                                   # 256 per device
    c, _ = estimate_chunk(4096, out, 144, 2.0, 1, platform="gpu")
    assert c == 1024
    big = output_bytes(CHANNELS, {**shapes, "bushing_force": (47, 6)}, 100_000)
    c, per = estimate_chunk(4096, big, 144, 2.0, 1, platform="gpu")
    assert c == int(2.0 * 2 ** 30 // per) < 1024        # long manoeuvre: the budget decides
    c, _ = estimate_chunk(3, out, 144, 2.0, 2, platform="cpu")
    assert c == 4                                     # 3 variants, rounded up to 2 devices


def test_default_jobs_split_a_chunk_over_the_cpu_devices_only_when_large_enough(monkeypatch):
    """Default CPU devices (sweep.runtime.xla_flags_from_env chose the count):
    a time-response chunk is split only from MIN_VARIANTS_PER_CPU_DEVICE
    variants per device (the quick start's single variant stays on one
    device, unpadded); job kinds that run on one device (max_devices=1: K&C,
    modes, Radau) get one-device chunks; a count the user chose is used as
    given. Two devices faked (this test process has one)."""
    from sweep.engine import mapping as engine
    monkeypatch.setattr(engine.jax, "device_count", lambda backend=None: 2)
    monkeypatch.setattr(engine, "cpu_devices_are_default", lambda: True)
    m = engine.MIN_VARIANTS_PER_CPU_DEVICE
    auto = {"chunk_size": "auto"}
    out, n_dof = 8 * 111 * 22, 144

    def chunks(n, sw=auto, **kw):
        return engine.chunking(sw, n, out, n_dof, **kw)[2:]
    assert chunks(1, max_devices=None) == (1, 1)
    assert chunks(2 * m - 1, max_devices=None) == (1, 2 * m - 1)
    assert chunks(2 * m, max_devices=None) == (2, 2 * m)
    assert chunks(4096, max_devices=None) == (2, 2 * engine.MAX_AUTO_CHUNK_CPU)
    assert chunks(4096) == (1, engine.MAX_AUTO_CHUNK_CPU)                 # one-device kinds
    assert chunks(12, {"chunk_size": 2}, max_devices=None) == (1, 2)
    assert chunks(4 * m, {"chunk_size": 2 * m + 1}, max_devices=None) == (2, 2 * m + 2)
    # a chunk larger than the variants of the design (or of a shard) only pads: capped
    assert chunks(8, {"chunk_size": 100000}, max_devices=None) == (1, 8)
    assert engine.chunking({"chunk_size": 100000, "num_shards": 2, "shard": 1}, 9, out, n_dof)[2:] == (1, 5)
    assert "(default; AXLE_CPU_DEVICES=1 for one)" in engine.devices_note(2, "cpu")
    assert engine.devices_note(1, "cpu").startswith("1 CPU device of 2 (default;")
    monkeypatch.setattr(engine, "cpu_devices_are_default", lambda: False)   # AXLE_CPU_DEVICES / XLA_FLAGS
    assert chunks(1, max_devices=None) == (2, 2)
    assert chunks(12, {"chunk_size": 2}, max_devices=None) == (2, 2)
    assert chunks(4096) == (1, engine.MAX_AUTO_CHUNK_CPU)


def test_resume_keeps_the_store_chunks_whatever_the_device_count(tmp_path, monkeypatch):
    """The auto chunk depends on the device count (not part of a job's
    identity): a store made with chunks of 4 (say one device) and resumed by
    a run that would use 6 (say two devices, or a store from before two
    devices became the default) keeps its chunks of 4; the run's devices drop
    to a count that divides them."""
    from sweep.engine import layout, mapping, stream
    from sweep.engine.stops import RunContext
    from sweep.kinds.base import Plan
    monkeypatch.setattr(mapping.jax, "device_count", lambda backend=None: 4)
    monkeypatch.setattr(mapping, "cpu_devices_are_default", lambda: False)
    X, pset = _design("sweep.n_variants=12")
    cfg = OmegaConf.create({"output": {"path": str(tmp_path / "c.zarr")}, "sweep": {"micro_batch": "auto"}})

    def job(chunk, n_dev):
        plan = Plan(model=None, pset=pset, X=X, shard=0, num_shards=1, chunk=chunk, n_dev=n_dev, micro_batch=None,
                    channels=(), shapes={}, coords={"variant": (np.arange(len(X)), {})}, lead=(),
                    iterations_long_name="iterations")
        return plan, layout.store_spec(plan)
    plan, spec = job(4, 1)
    with RunContext() as ctx:
        _, store, created, todo, plan = stream.open_store(ctx, cfg, plan, spec, {}, "identity")
        assert created and store.chunk == 4 and todo == [0, 1, 2]
    plan, spec = job(6, 2)
    with RunContext() as ctx:
        _, store, created, todo, plan = stream.open_store(ctx, cfg, plan, spec, {}, "identity")
    assert not created and todo == [0, 1, 2]
    assert (plan.chunk, plan.n_dev) == (4, 2) and store.region(2) == (8, 12)
    plan, spec = job(6, 3)
    with RunContext() as ctx:
        plan = stream.open_store(ctx, cfg, plan, spec, {}, "identity")[-1]
    assert (plan.chunk, plan.n_dev) == (4, 2)


DEVICE_COUNT = """
import sys
import sweep.app, sweep.kinds.kc, sweep.tune   # the entry points' modules: none starts a JAX backend
from sweep import runtime
runtime.xla_flags_from_env()
import jax
print(jax.device_count(), runtime.cpu_devices_are_default())
"""


def _device_count(**env):
    e = {k: v for k, v in os.environ.items()
         if k not in ("AXLE_CPU_DEVICES", "AXLE_CPU_DEVICES_DEFAULT", "XLA_FLAGS")}
    e.update(env)
    proc = subprocess.run([sys.executable, "-c", DEVICE_COUNT], cwd=ROOT, env=e, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    n, default = proc.stdout.split()
    return int(n), default == "True"


def test_cpu_device_count_default_and_overrides():
    """The entry points' device set-up (no compile): by default one JAX CPU
    device per usable core, at most MAX_DEFAULT_CPU_DEVICES, also when the
    entry point's modules (python -m sweep / sweep.tune, the job kinds) are
    imported first; AXLE_CPU_DEVICES=1 keeps one; a count in XLA_FLAGS wins
    over AXLE_CPU_DEVICES, except one that a parent process set by default."""
    from sweep.runtime import MAX_DEFAULT_CPU_DEVICES, usable_cores
    assert _device_count(AXLE_CPU_DEVICES="1") == (1, False)
    assert _device_count(AXLE_CPU_DEVICES="1", XLA_FLAGS="--xla_force_host_platform_device_count=3") == (3, False)
    inherited = {"XLA_FLAGS": "--xla_force_host_platform_device_count=2", "AXLE_CPU_DEVICES_DEFAULT": "2"}
    assert _device_count(AXLE_CPU_DEVICES="1", **inherited) == (1, False)
    if usable_cores() < 2:
        pytest.skip("one usable core: the default is one device")
    assert _device_count() == (min(usable_cores(), MAX_DEFAULT_CPU_DEVICES), True)


@pytest.mark.parametrize("design", ["lhs", "sobol", "random"])
def test_designs_are_deterministic_and_within_bounds(design):
    X1, pset = _design(f"sweep.design={design}", "sweep.n_variants=64", "sweep.seed=3")
    X2, _ = _design(f"sweep.design={design}", "sweep.n_variants=64", "sweep.seed=3")
    X3, _ = _design(f"sweep.design={design}", "sweep.n_variants=64", "sweep.seed=4")
    np.testing.assert_array_equal(X1, X2)
    assert not np.allclose(X1, X3)
    assert X1.shape == (64, len(pset))
    for i, p in enumerate(pset.params):
        assert np.all(X1[:, i] >= p.lower) and np.all(X1[:, i] <= p.upper)
        if design == "lhs":  # one sample per stratum of the sampling space
            strata = np.floor(p.to_unit(X1[:, i]) * 64).astype(int)
            assert sorted(strata) == list(range(64))
    # log scale: uniform in the logarithm -> the geometric midpoint is the median
    i = pset.names.index("longitudinal_link_radial")
    assert abs(np.median(np.log(X1[:, i]))) < 0.15


def test_grid_and_table_designs(tmp_path):
    X, pset = _design("sweep=grid", "sweep.levels=2")
    assert X.shape == (2 ** len(pset), len(pset))
    assert len({tuple(r) for r in X}) == len(X)
    csv = tmp_path / "d.csv"
    rows = [",".join(pset.names)] + [",".join(str(v) for v in X[i]) for i in (0, 5)]
    csv.write_text("\n".join(rows) + "\n")
    T, _ = _design("sweep=table", f"sweep.table={csv}")
    np.testing.assert_allclose(T, X[[0, 5]])
    # saved by Excel as "CSV UTF-8": a byte-order mark before the first column's name
    csv.write_bytes(b"\xef\xbb\xbf" + ("\n".join(rows) + "\n").encode())
    T, _ = _design("sweep=table", f"sweep.table={csv}")
    np.testing.assert_allclose(T, X[[0, 5]])
    with pytest.raises(ModelError, match=rf"sweep.levels = \[2, 2\]: 2 value\(s\) for {len(pset)} parameter"):
        _design("sweep=grid", "sweep.levels=[2,2]")
    csv.write_text(",".join(pset.names) + "\n" + ",".join(["9.0"] * len(pset)) + "\n")
    with pytest.raises(ModelError, match="outside bounds"):
        _design("sweep=table", f"sweep.table={csv}")


@pytest.mark.parametrize("override, message", [
    ("sweep.n_variants=0", "sweep.n_variants = 0 must be >= 1"),
    ("sweep.parameters.spring_rate.bounds=[1.2,0.8]", "sweep.parameters.spring_rate.bounds = [1.2, 0.8] are reversed"),
    ("sweep.parameters.upper_arm_radial.elements=upper_wishbone_*", "matches no bushing"),
    ("+sweep.parameters.spring_rate.scaling=log", "sweep.parameters.spring_rate.scaling: unknown key"),
    ("sweep.parameters.spring_rate.target=spring.stiffness", "target = 'spring.stiffness' is not one of"),
    ("sweep.design=halton", "sweep.design = 'halton' is not one of"),
    ("integrator.solver=cholesky", "integrator.solver = 'cholesky' is not one of block, dense"),
    # semantic checks: values that would be accepted and change the study silently
    ("+sweep.parameters.spring_rate.directions=x", "sweep.parameters.spring_rate.directions = 'x': spring elements"),
    ("+sweep.parameters.upper_arm_radial.mode=value",
     "sweep.parameters.upper_arm_radial.nominal is missing: mode=value needs the nominal value"),
    ("loadcase.nmse_window=[6.0,4.9]", "loadcase.nmse_window = [6.0, 4.9]: is reversed or empty"),
])
def test_bad_sweep_config_is_one_line_before_compute(override, message, capsys, tmp_path):
    from sweep.app import main
    cfg = cfg_of(*SHORT, *PARAMS, override, f"output.path={tmp_path}/c.zarr")
    assert main(cfg, progress=False) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert not os.path.exists(tmp_path / "c.zarr"), "nothing may be computed or written"


def test_parameters_act_on_the_model(dw_model):
    from sweep.params import build_parameters
    spec = {"ll": {"target": "bushing.stiffness", "elements": "longitudinal_link_body_*",
                   "directions": "radial", "bounds": [0.1, 10], "scale": "log"},
            "reb": {"target": "damper.rebound", "elements": "damper_*", "bounds": [0.5, 2]},
            "k": {"target": "bushing.stiffness", "elements": "tie_rod_inner_left", "directions": ["z"],
                  "mode": "value", "nominal": 1e8, "bounds": [1e7, 1e9]}}
    pset = build_parameters(spec, dw_model)
    m = pset.apply(dw_model, np.array([3.0, 1.5, 2e8]))
    names = dw_model.topology.bushing_names
    i = names.index("longitudinal_link_body_right")
    np.testing.assert_allclose(np.asarray(m.bu_k_scale[i]), [3, 3, 1, 1, 1, 1])
    j = dw_model.topology.p2p_names.index("damper_left")
    np.testing.assert_allclose(np.asarray(m.pp_c_scale[j]), [1.0, 1.5])
    t = names.index("tie_rod_inner_left")
    assert float(m.bu_k[t, 2]) == 2e8 and float(m.bu_k[t, 0]) == float(dw_model.bu_k[t, 0])


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
    from sweep import cube_schema
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
    return [sys.executable, "-m", "sweep", *SHORT, *PARAMS, "sweep.n_variants=12",
            "sweep.chunk_size=2", "sweep.progress=false", f"output.path={path}", *extra]


# the jobs of this file run as `python -m sweep` subprocesses on one CPU
# device (AXLE_CPU_DEVICES=1; the device count is part of the compilation
# cache key): all of them are the same program, compiled once by the
# reference run and loaded from the persistent compilation and trace caches
# by the others (each compile of the double wishbone's chunk runner is 1-2
# minutes on 2 cores)
ONE_DEVICE = {"AXLE_CPU_DEVICES": "1"}


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
    repository) accepts the cube; sweep.cube_schema runs the same checks
    where it is absent."""
    if not os.path.exists(CHECK_CUBE):
        pytest.skip(f"{CHECK_CUBE} is not there (a clone without ../shared); sweep.cube_schema checks instead")
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
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2")
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


def test_notebook_executes_on_a_small_cube(reference_12, tmp_path, monkeypatch):
    """notebooks/01_result_cube.ipynb runs top to bottom on a small cube (path
    from AXLE_CUBE), shows its figures, and ranks the parameters exactly as a
    direct computation from the cube does."""
    import nbformat
    from nbclient import NotebookClient
    nb = nbformat.read(os.path.join(ROOT, "notebooks", "01_result_cube.ipynb"), as_version=4)
    monkeypatch.setenv("AXLE_CUBE", str(reference_12))
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    text, png = notebook_outputs(nb)
    assert png >= 2, "the notebook's figures are not in its outputs"
    expected = sensitivity_ranking(reference_12)
    assert len(expected["peak_bushing_force"]) >= 2
    for r, ranking in expected.items():
        assert f"ranking {r}: " + " > ".join(ranking) in text, (r, ranking, text[-2000:])
