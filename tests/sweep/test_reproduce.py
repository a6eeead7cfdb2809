"""A cube's parameters reproduce its results.

Each chosen variant of a result cube is re-run alone from the parameter
values RECORDED IN THE CUBE (its parameter variables, not the design
generator); the re-run must give the cube's results for that variant: every
data channel to 1e-10 of the channel's largest magnitude in the cube, the
integer variables (status, iteration counts, convergence flags) exactly.

Oracle: a variant's results are a function of its own parameters only - no
coupling between the variants of a chunk, its lanes, its devices or the
runs of a resumed job (tests/e2e/test_sweep_jobs.py shows lane
independence) - so a run of that variant alone is the reference for its
row of the cube. Why: a store that records a chunk's parameter values in
another order than its results (reversed within the chunk, shifted by a
chunk, mixed up on resume or across devices) passes every check of the
values alone, and a user reads every sensitivity from the wrong variant
(tests/mutants.py: ``cube_param_order``).

Cheap, on the toy axle (24 DOF, a 0.05 s window around the step: 11
samples; K&C: 5 travel steps), in chunks of 4 variants everywhere. The
replays run in-process on one device, each variant alone in its own chunk
(the replay table repeats it in all 4 lanes, and the lanes must agree), so
the resumed job and both time-response replays share one compiled program,
the K&C job and its replay another (in-memory, persistent compilation and
trace caches: tests/conftest.py). The two-device cube, a ``python -m sweep``
subprocess (this test process has one JAX CPU device), is an e2e test:
tests/e2e/test_reproduce_two_devices.py; the K&C cube runs in the slow
tier (tests/sweep/test_reproduce_kc.py), and so does this file's resumed
time-response cube; the fast tier's check of the order is
tests/sweep/engine/test_stream_order.py (the pipeline without compute).
"""

import numpy as np
import pytest
import xarray as xr
from omegaconf import OmegaConf

from tests.jobs import cfg_of

pytestmark = pytest.mark.slow

C = 4                    # variants per compute chunk, in every job of this file
# the toy axle, three swept parameters (a stiffness factor on a log scale, a
# stiffness value in N/m, a spring-rate factor)
TOY = ["model=toy_trailing_arm", "sweep=lhs", "sweep.start=null", "sweep.every=null", "~sweep.parameters",
       "+sweep.parameters.pf={target: bushing.stiffness, elements: 'pivot_front_*', directions: radial, "
       "bounds: [0.5, 2.0], scale: log}",
       "+sweep.parameters.rm={target: bushing.stiffness, elements: 'rear_mount_*', directions: [x], "
       "mode: value, nominal: 1.0e+6, bounds: [5.0e+5, 2.0e+6]}",
       "+sweep.parameters.sp={target: spring.rate, elements: 'spring_*', bounds: [0.85, 1.15]}",
       f"sweep.chunk_size={C}", "sweep.progress=false"]
STEP = ["loadcase.t_start=4.98", "loadcase.t_end=5.03", "output.every=5"]    # 11 samples around the step
KC = ["loadcase=kc_wheel_travel", "loadcase.travel=[-0.04,0.04]", "loadcase.steps=5"]
HANG_GUARD = 900         # s: only against a hung subprocess, not a performance deadline


def run_in_process(*over):
    """The job of a command line run in this process as ``python -m sweep``
    runs it (sweep.app.main: config checks, the one pipeline sweep.engine.run)
    without the report and its picture; returns the run's summary."""
    from sweep import engine
    from sweep.app import job_config
    from sweep.kinds import kind_of
    from sweep.core.config import check_config
    cfg = cfg_of(*over)
    kind = kind_of(cfg)
    check_config(cfg, kind)
    cfg = job_config(cfg)
    return engine.run(kind, cfg, OmegaConf.to_yaml(cfg, resolve=True), progress=False)


def recorded_parameters(ds):
    """(names, (n_variants, n_parameters) values) as the cube records them."""
    names = list(ds.attrs["parameters"])
    return names, np.stack([ds[p].values for p in names], axis=1)


def per_variant(ds):
    return [n for n, v in ds.data_vars.items() if "variant" in v.dims]


def replay(ds, variants, job, tmp_path):
    """Re-run each of ``variants`` alone from the parameter values that cube
    ``ds`` records: a table design (a CSV of the recorded values, each float
    written exactly) with variant ``variants[i]`` in all C lanes of chunk i,
    in a job of the same structure and chunk size as ``job`` (the same
    compiled program). Returns the replay cube, row i = ``variants[i]``."""
    names, X = recorded_parameters(ds)
    assert np.all(np.isfinite(X[variants])), "the cube records no parameter values for a variant it reports"
    csv = tmp_path / "replay.csv"
    rows = [",".join(names)] + [",".join(repr(float(x)) for x in X[v]) for v in variants for _ in range(C)]
    csv.write_text("\n".join(rows) + "\n")
    path = tmp_path / "replay.zarr"
    s = run_in_process(*job, "sweep=table", f"sweep.table={csv}", f"output.path={path}")
    assert (s["chunk"], s["variants_run"]) == (C, C * len(variants)), s
    rep = xr.load_dataset(path, engine="zarr")
    np.testing.assert_array_equal(recorded_parameters(rep)[1], np.repeat(X[variants], C, axis=0))
    for name in per_variant(rep):                # alone in its chunk: its C lanes agree
        v = rep[name].values.reshape((len(variants), C) + rep[name].shape[1:])
        np.testing.assert_array_equal(v, np.broadcast_to(v[:, :1], v.shape), err_msg=name)
    return rep.isel(variant=slice(None, None, C))


def assert_reproduced(ds, variants, rep):
    """Every per-variant data variable of cube ``ds`` at ``variants`` equals
    the replay ``rep`` (row i = ``variants[i]``): floats to 1e-10 of the
    variable's largest finite magnitude in the cube (NaN where the cube has
    NaN: a quantity the model does not define), integers exactly. The
    variants must be ok and any two of them far apart (1e-4 of a channel's
    scale, 1e6 times the tolerance), else a mix-up could pass unseen."""
    assert list(ds.status.values[variants]) == [0] * len(variants), ds.status.values
    names = per_variant(ds)
    assert {"status", "equilibrium_iterations", "toe", "wheel_centre_displacement"} <= set(names), names
    assert set(per_variant(rep)) == set(names)
    gap = np.zeros((len(variants), len(variants)))
    for name in names:
        cube, alone = ds[name].values[variants], rep[name].values
        if ds[name].dtype.kind in "iub":
            np.testing.assert_array_equal(cube, alone, err_msg=name)
            continue
        every = np.abs(ds[name].values)
        scale = float(every[np.isfinite(every)].max()) if np.isfinite(every).any() else 0.0
        np.testing.assert_allclose(cube, alone, rtol=0, atol=1e-10 * scale,
                                   err_msg=f"{name} of variants {variants}: the cube's results (actual) are not "
                                           "those of its recorded parameters run alone (desired)")
        flat = cube.reshape(len(variants), -1)
        for i in range(len(variants)):
            for j in range(i):
                d = np.abs(flat[i] - flat[j])
                if scale and np.isfinite(d).any():
                    gap[i, j] = max(gap[i, j], float(np.nanmax(d)) / scale)
    low = np.tril_indices(len(variants), -1)
    assert gap[low].min() > 1e-4, f"variants {variants} hardly differ: {gap}"


class Killed(Exception):
    """Stands for the SIGKILL of ``AXLE_TEST_KILL_AFTER_CHUNKS`` (tests/fault_sweep.py, which kills
    the whole process), raised at the same point: the chunk written and
    flagged, the next one computed but not written."""


def test_resumed_cube_parameters_reproduce_its_results(tmp_path, monkeypatch):
    """11 variants in 3 chunks of 4 (the last padded); the job is killed
    after its first chunk, a rerun resumes it and computes chunks 1 and 2
    (its own 1st and 2nd: a mix-up of the run's chunk count with the chunk
    index shows). Replayed: the last variant of the first run's chunk, the
    first and last of each resumed chunk."""
    from sweep.engine.stops import RunContext
    path = tmp_path / "resumed.zarr"
    job = [*TOY, *STEP, "sweep.n_variants=11", f"output.path={path}"]

    def kill_after(written):
        if written == 1:
            raise Killed
    with monkeypatch.context() as m:
        m.setattr(RunContext, "on_chunk_written", staticmethod(kill_after))
        with pytest.raises(Killed):
            run_in_process(*job)
    assert list(xr.open_zarr(path).chunk_done.values) == [1, 0, 0]
    s = run_in_process(*job)
    assert (s["todo"], s["variants_run"], s["chunk"], s["devices"]) == (2, 7, C, 1), s
    ds = xr.load_dataset(path, engine="zarr")
    assert list(ds.chunk_done.values) == [1, 1, 1]
    variants = [3, 4, 7, 8, 10]
    assert_reproduced(ds, variants, replay(ds, variants, [*TOY, *STEP], tmp_path))
