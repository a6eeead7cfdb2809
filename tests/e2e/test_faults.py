"""Faults around a sweep job, as a user meets them (subprocess tests of
``python -m sweep`` on the toy axle, 6 variants in 3 chunks of 2):

- chunk files deleted or truncated after the job: ``python -m sweep.verify``
  finds them, a rerun reports and recomputes them;
- SIGTERM after a chunk / SIGINT during compilation: one line on stderr
  (what is saved, how to resume), exit 143 / 130, no traceback, a store
  that opens and resumes;
- a store copied elsewhere resumes there (the job identity has no path);
- a second process on the same store is refused (lock file); stale locks
  and creation folders of dead processes are cleaned up;
- a write error (disk full) gives one line and a consistent store.

Deterministic: faults are injected by hooks (``AXLE_TEST_KILL_AFTER_CHUNKS`` of
the launcher ``tests/fault_sweep.py``,
a patched writer) or after the job reported progress, never by the clock.
Every run shares one persistent compilation cache, so only the first
compiles (the toy axle, a 0.05 s step).
"""
import glob
import os
import shutil
import signal
import socket
import subprocess
import sys

import numpy as np
import pytest
import xarray as xr

from tests.conftest import ROOT

TOY = ["model=toy_trailing_arm", "loadcase.t_start=4.98", "loadcase.t_end=5.03", "output.every=5",
       "sweep=lhs", "sweep.start=null", "sweep.every=null", "~sweep.parameters",
       "+sweep.parameters.pf={target: bushing.stiffness, elements: 'pivot_front_*', directions: radial, "
       "bounds: [0.5, 2.0], scale: log}",
       "+sweep.parameters.rm={target: bushing.stiffness, elements: 'rear_mount_*', directions: [x], "
       "mode: value, nominal: 1.0e+6, bounds: [5.0e+5, 2.0e+6]}",
       "sweep.n_variants=6", "sweep.chunk_size=2", "sweep.progress=false"]
VARS = ("wheel_centre_displacement", "toe", "camber", "bushing_force", "status", "pf", "rm")
HANG_GUARD = 900          # s: only against a hung process, not a performance deadline


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """One persistent compilation cache for every job of this module."""
    cache = tmp_path_factory.mktemp("jax_cache")
    e = dict(os.environ, AXLE_JAX_CACHE_DIR=str(cache), AXLE_CPU_DEVICES="1")
    for k in ("AXLE_TEST_KILL_AFTER_CHUNKS", "AXLE_TEST_KILL_SIGNAL"):
        e.pop(k, None)
    return e


def cmd(path, *extra):
    # the sweep with the tests' fault injection (tests/fault_sweep.py: python -m sweep without its variables)
    return [sys.executable, "-m", "tests.fault_sweep", *TOY, f"output.path={path}",
            f"hydra.run.dir={os.path.dirname(str(path))}/hydra", *extra]


def run(path, env, *extra, **kw):
    return subprocess.run(cmd(path, *extra), cwd=ROOT, capture_output=True, text=True,
                          timeout=HANG_GUARD, env=env, **kw)


def verify(*paths):
    return subprocess.run([sys.executable, "-m", "sweep.verify", *map(str, paths)], cwd=ROOT,
                          capture_output=True, text=True, timeout=HANG_GUARD)


def lines(text):
    return [ln for ln in text.splitlines() if ln.strip()]


def assert_same(a, b):
    for name in VARS:
        np.testing.assert_array_equal(a[name].values, b[name].values, err_msg=name)


@pytest.fixture(scope="module")
def reference(tmp_path_factory, env):
    path = tmp_path_factory.mktemp("reference") / "ref.zarr"
    proc = run(path, env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "compiling LSRT2 chunk runner: toy_trailing_arm" in proc.stdout
    assert os.path.getsize(str(path)[:-5] + ".png") > 10_000          # the overview plot beside it
    return path


@pytest.fixture(scope="module")
def ref(reference):
    return xr.load_dataset(reference, engine="zarr")


def chunk_files(path, name, k):
    """The zarr chunk files of variable ``name`` that belong to compute chunk k."""
    return sorted(glob.glob(os.path.join(str(path), name, f"{k}.*")))


# --------------------------------------------------------------------------- silent bad data

def test_damaged_chunks_are_found_reported_and_recomputed(reference, ref, tmp_path, env):
    path = tmp_path / "damaged.zarr"
    shutil.copytree(reference, path)
    ok = verify(path)
    assert ok.returncode == 0 and "ok, 3 of 3 chunk(s) written and verified" in ok.stdout, ok.stdout
    deleted = chunk_files(path, "bushing_force", 1)
    assert deleted
    for f in deleted:                                   # chunk 1: bushing forces deleted
        os.remove(f)
    truncated = chunk_files(path, "wheel_centre_displacement", 2)[0]
    with open(truncated, "r+b") as f:                   # chunk 2: a truncated file
        f.truncate(os.path.getsize(truncated) // 2)
    bad = verify(path)
    assert bad.returncode == 1, bad.stdout
    out = lines(bad.stdout)
    assert any("chunk 1 (variants 2-3): bushing_force does not match its checksum" in ln for ln in out), out
    assert any("chunk 2 (variants 4-5): wheel_centre_displacement cannot be read" in ln for ln in out), out
    assert not any("chunk 0" in ln for ln in out)
    # the rerun says so and recomputes exactly those two chunks
    proc = run(path, env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = proc.stdout + proc.stderr
    assert "chunk 1 (variants 2-3) is damaged" in text and "chunk 2 (variants 4-5) is damaged" in text, text
    assert "recomputing it" in text and "4 variant(s)" in text, text
    assert_same(xr.load_dataset(path, engine="zarr"), ref)
    assert verify(path).returncode == 0
    # a store that does not open at all is damaged, too
    os.remove(path / ".zmetadata")
    shutil.rmtree(path / "toe")
    bad = verify(path)
    assert bad.returncode == 1 and len(lines(bad.stdout)) >= 1


def test_damaged_metadata_is_repaired_by_the_rerun_without_recompute(reference, ref, tmp_path, env):
    """The metadata is kept twice (consolidated and per array); a garbled
    copy is found by verify (which says a rerun repairs it) and rewritten
    from the other by the rerun - nothing recomputed, nothing lost; the
    overview picture missing beside a complete store is drawn again."""
    import json
    from sweep.results.plots import png_intact
    path = tmp_path / "meta.zarr"
    shutil.copytree(reference, path)
    (path / ".zmetadata").write_text('{"metadata": {".zgroup": {"zarr_fo')     # cut mid-write
    bad = verify(path)
    assert bad.returncode == 1 and "a rerun of the job repairs it from the intact copy" in bad.stdout, bad.stdout
    proc = run(path, env)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, text[-3000:]
    assert "rebuilt from the per-array metadata" in text and "nothing to run" in text, text
    assert_same(xr.load_dataset(path, engine="zarr"), ref)
    assert verify(path).returncode == 0
    png = tmp_path / "meta.png"
    assert png_intact(str(png)), "the rerun draws the missing overview picture"
    # a per-array file that claims another shape
    f = path / "toe" / ".zarray"
    meta = json.loads(f.read_text())
    meta["shape"][0] = 99
    f.write_text(json.dumps(meta))
    bad = verify(path)
    assert bad.returncode == 1 and "toe/.zarray differs from the consolidated metadata (shape)" in bad.stdout
    png.write_bytes(png.read_bytes()[:72])                                       # a truncated picture
    proc = run(path, env)
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "toe/.zarray" in text and "rewritten from the consolidated" in text, text
    assert "nothing to run" in text
    assert_same(xr.load_dataset(path, engine="zarr"), ref)
    assert verify(path).returncode == 0 and png_intact(str(png))


def test_cube_layout_units_and_chunking(reference):
    """Units parse per component, value-mode parameters have real units,
    chunk_done is a coordinate (not broadcast by ds.where), one bushing is one
    zarr chunk column, and the project's own schema check passes."""
    import zarr

    from sweep.results import schema as cube_schema
    from sweep.results.cube import split_loads
    ds = xr.open_zarr(reference)
    assert cube_schema.check(reference) == []
    assert "chunk_done" in ds.coords and "chunk_done" not in ds.data_vars
    masked = ds.where((ds.status == 0).compute(), drop=True)
    assert masked.chunk_done.dims == ("chunk",)
    assert ds.pf.attrs["units"] == "1" and ds.rm.attrs["units"] == "N/m"
    assert list(ds.component_units.values) == ["N", "N", "N", "N m", "N m", "N m"]
    loads = split_loads(ds)
    assert loads.bushing_force.attrs["units"] == "N" and loads.bushing_moment.attrs["units"] == "N m"
    np.testing.assert_array_equal(loads.bushing_moment.values, ds.bushing_force.values[..., 3:])
    g = zarr.open_group(str(reference), mode="r")
    bf = g["bushing_force"]
    assert bf.chunks[0] == 2 and bf.chunks[2] == 1 and bf.chunks[3] == 6


# --------------------------------------------------------------------------- stops

def test_sigkill_hook_then_the_moved_store_resumes_elsewhere(reference, ref, tmp_path, env):
    """SIGKILL after exactly one chunk (hook, no clock). The killed store,
    moved to another path, resumes there (the job identity has no
    output.path); the killed run's stale lock entry is taken over and the
    leftovers of runs killed while creating a store are removed; the result
    equals the uninterrupted run."""
    path = tmp_path / "killed.zarr"
    proc = run(path, dict(env, AXLE_TEST_KILL_AFTER_CHUNKS="1"))
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert list(xr.open_zarr(path).chunk_done.values) == [1, 0, 0]
    assert os.path.exists(str(path) + ".lock")          # the killed run's entry stays behind
    moved = tmp_path / "elsewhere" / "moved.zarr"
    os.makedirs(moved.parent)
    shutil.move(str(path), str(moved))
    shutil.move(str(path) + ".lock", str(moved) + ".lock")
    host = socket.gethostname().replace(".", "_")
    stale = [f"{moved}.init-{host}.{_dead_pid()}.0badf00d", f"{moved}.init-0badf00d"]
    for s in stale:
        os.makedirs(s)
    os.utime(stale[1], (1e9, 1e9))
    proc = run(moved, env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = proc.stdout + proc.stderr
    assert "another config" not in text and "taking over the lock of process" in text, text
    assert "4 variant(s)" in text, text
    assert not any(os.path.exists(s) for s in stale)
    assert not os.path.exists(str(moved) + ".lock")
    assert_same(xr.load_dataset(moved, engine="zarr"), ref)


def test_sigterm_after_a_chunk_is_one_line_and_resumable(tmp_path, env):
    """SIGTERM (what SLURM sends) after a chunk: one line, exit 143, the
    store consistent and resumable (resuming is shown after SIGKILL above)."""
    path = tmp_path / "term.zarr"
    proc = run(path, dict(env, AXLE_TEST_KILL_AFTER_CHUNKS="1", AXLE_TEST_KILL_SIGNAL="TERM"))
    assert proc.returncode == 128 + signal.SIGTERM, proc.stderr[-2000:]
    err = lines(proc.stderr)
    assert len(err) == 1, err
    assert err[0] == (f"interrupted by SIGTERM: 1 of 3 chunk(s) are saved in {path}; "
                      "run the same command again to resume"), err
    assert not os.path.exists(str(path) + ".lock")
    assert list(xr.open_zarr(path).chunk_done.values) == [1, 0, 0]
    v = verify(path)
    assert v.returncode == 0 and "1 of 3 chunk(s) written and verified, 2 not run yet" in v.stdout, v.stdout


def _dead_pid():
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def _start_until_compiling(path, env, *extra):
    """Start a job and wait (on its output, not on a clock) until it compiles:
    its store and lock exist then. Caches off: with the trace and compilation
    caches a rerun of the toy job compiles in ~1 s and could finish before the
    test acts on it (seen in CI: the second process found the store done)."""
    proc = subprocess.Popen(cmd(path, *extra, "cache.enabled=false"), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if "compiling" in line:
            return proc
    proc.wait()
    raise AssertionError("job ended before compiling: " + "".join(seen) + proc.stderr.read())


def test_sigint_during_compile_is_one_line_and_leaves_a_resumable_store(tmp_path, env):
    path = tmp_path / "int.zarr"
    proc = _start_until_compiling(path, env)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=HANG_GUARD)
    assert proc.returncode == 128 + signal.SIGINT, stderr
    err = lines(stderr)
    assert len(err) == 1 and "Traceback" not in stderr, err
    assert err[0] == (f"interrupted by SIGINT: 0 of 3 chunk(s) are saved in {path} (the compilation "
                      "was abandoned); run the same command again to resume"), err
    assert not os.path.exists(str(path) + ".lock")
    v = verify(path)
    assert v.returncode == 0 and "0 of 3 chunk(s) written and verified, 3 not run yet" in v.stdout, v.stdout


# --------------------------------------------------------------------------- locks

def test_second_process_on_the_same_store_is_refused(tmp_path, env):
    path = tmp_path / "busy.zarr"
    first = _start_until_compiling(path, env)
    try:
        second = run(path, env)                      # (shards: test_lock_semantics)
        assert second.returncode == 2, second.stdout + second.stderr
        err = lines(second.stderr)
        assert len(err) == 1, err
        assert f"is in use by process {first.pid} on" in err[0] and "wait for it to finish" in err[0], err
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=HANG_GUARD)
    assert first.returncode == 128 + signal.SIGTERM


# --------------------------------------------------------------------------- write errors

WRITE_ERROR = """
import errno, sys
from sweep.results import store
original = store.CubeStore.write_chunk
calls = []
def failing(self, k, start, data):
    calls.append(k)
    if len(calls) == 2:                       # the second chunk: half its arrays, then disk full
        for name in list(data)[: len(data) // 2]:
            self.group[name][start:start + data[name].shape[0]] = data[name]
        raise OSError(errno.ENOSPC, "No space left on device", self.path + "/bushing_force/1.0.0.0")
    return original(self, k, start, data)
store.CubeStore.write_chunk = failing
sys.argv = ["sweep", *sys.argv[1:]]
from sweep.entry import sweep_cli
sweep_cli()
"""


def test_write_error_is_one_line_and_the_store_stays_consistent(ref, tmp_path, env):
    path = tmp_path / "full.zarr"
    proc = subprocess.run([sys.executable, "-c", WRITE_ERROR, *cmd(path)[3:]], cwd=ROOT, capture_output=True,
                          text=True, timeout=HANG_GUARD, env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = lines(proc.stderr)
    assert len(err) == 1 and "Traceback" not in proc.stderr, err
    assert "writing chunk 1 (variants 2-3)" in err[0] and "No space left on device" in err[0], err
    assert "1 of 3 chunk(s) are saved" in err[0] and "run the same command again" in err[0], err
    assert not os.path.exists(str(path) + ".lock")
    ds = xr.load_dataset(path, engine="zarr")
    assert list(ds.chunk_done.values) == [1, 0, 0]            # the failed chunk is not flagged
    assert_same(ds.isel(variant=slice(0, 2)), ref.isel(variant=slice(0, 2)))
    assert verify(path).returncode == 0                       # so a rerun resumes it (as after SIGTERM)


# --------------------------------------------------------------------------- every variant failed

def test_a_job_whose_every_variant_failed_exits_1_with_one_line_and_no_picture(tmp_path, env):
    """Both variants of a table design break the static equilibrium (every
    bushing's stiffness 1e-12 of nominal: the axle is held by nothing). The
    job writes the cube with each variant's status, draws no picture from
    NaN and exits 1 with one line saying so."""
    csv = tmp_path / "failing.csv"
    csv.write_text("soft\n1e-12\n2e-12\n")
    path = tmp_path / "failed.zarr"
    over = ["model=toy_trailing_arm", "loadcase.t_start=4.98", "loadcase.t_end=5.03", "output.every=5",
            "sweep=table", f"sweep.table={csv}", "sweep.start=null", "sweep.every=null", "~sweep.parameters",
            "+sweep.parameters.soft={target: bushing.stiffness, elements: '*', bounds: [1.0e-12, 2.0], scale: log}",
            "sweep.chunk_size=2", "sweep.progress=false", f"output.path={path}", f"hydra.run.dir={tmp_path}/hydra"]
    proc = subprocess.run([sys.executable, "-m", "sweep", *over], cwd=ROOT, capture_output=True, text=True,
                          timeout=HANG_GUARD, env=env)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    err = [ln for ln in lines(proc.stderr + proc.stdout) if "error:" in ln]
    assert len(err) == 1 and "every variant failed" in err[0] and "equilibrium_failed 2" in err[0], err
    assert "Traceback" not in proc.stderr
    ds = xr.load_dataset(path, engine="zarr")
    assert list(ds.status.values) == [1, 1] and list(ds.chunk_done.values) == [1]
    assert not os.path.exists(str(path)[:-5] + ".png")
