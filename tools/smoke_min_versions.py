"""Smoke test of the installed dependency versions (tools/check_min_versions.sh):
the zarr / xarray / dask API the project uses, through the project's own code.

1. a result store: ``sweep.results.store.create_store`` (zarr format 2 groups, arrays,
   string coordinates, consolidated metadata), a chunk written and flagged,
   read back lazily with ``xarray.open_zarr`` (dask) and verified;
2. a dataset written as the tuning history is (``to_zarr(zarr_format=2)``);
3. with ``--job``: a short job of the toy axle through ``python -m sweep``
   (JAX: compile, shard_map/vmap, equilibrium, LSRT2), checked with the
   project's cube check.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import xarray as xr

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def store_roundtrip(tmp):
    from sweep.results import store
    n, T, C = 6, 5, 4
    spec = {
        "__coords__": {"variant": (np.arange(n), {}), "time": (np.linspace(0, 1, T), {"units": "s"}),
                       "side": (np.array(["left", "right"]), {})},
        "x": (("variant", "time", "side"), (n, T, 2), "f8", (C, T, 2), np.nan, {"units": "m"}),
        "status": (("variant",), (n,), "i1", (C,), -1, {"long_name": "status"}),
    }
    path = os.path.join(tmp, "s.zarr")
    st, created = store.create_store(path, spec, {"model": "smoke"}, "identity: smoke")
    assert created
    data = {"x": np.ones((C, T, 2)), "status": np.zeros(C, np.int8)}
    st.write_chunk(0, 0, data)
    ds = xr.open_zarr(path)
    assert ds.x.chunks is not None, "open_zarr is not lazy: dask missing?"
    assert float(ds.x.isel(variant=0).sum()) == T * 2
    assert np.isnan(float(ds.x.isel(variant=5, time=0, side=0)))
    assert list(ds.side.values) == ["left", "right"] and int(ds.status[0]) == 0
    sel = ds.isel(variant=(ds.status == 0).values)       # select, then compute
    assert sel.sizes["variant"] == C and float(sel.x.mean()) == 1.0
    if hasattr(store, "verify_store"):
        store.verify_store(path)
    return path


def history_roundtrip(tmp):
    ds = xr.Dataset({"objective": (("iteration", "start"), np.random.default_rng(0).random((3, 2)))},
                    coords={"iteration": np.arange(3), "start": np.arange(2)}, attrs={"a": "b"})
    path = os.path.join(tmp, "h.zarr")
    ds.to_zarr(path, mode="w", zarr_format=2, consolidated=True)
    back = xr.open_zarr(path)
    np.testing.assert_array_equal(back.objective.values, ds.objective.values)


def job(tmp):
    out = os.path.join(tmp, "job", "lsrt2.zarr")
    env = dict(os.environ, AXLE_JAX_CACHE_DIR=os.path.join(tmp, "jax-cache"))
    proc = subprocess.run([sys.executable, "-m", "sweep", "model=toy_trailing_arm", "loadcase.t_start=4.95",
                           "loadcase.t_end=5.05", f"output.path={out}", f"hydra.run.dir={tmp}/hydra",
                           "sweep.progress=false"], cwd=ROOT, capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ds = xr.open_zarr(out)
    assert int(ds.status[0]) == 0 and np.all(np.isfinite(ds.toe.values))
    print(proc.stdout.strip().splitlines()[0])


def main():
    import importlib.metadata as md
    print("versions: " + ", ".join(f"{p} {md.version(p)}" for p in
                                   ("numpy", "zarr", "numcodecs", "xarray", "dask", "jax", "jaxlib")
                                   if _has(p)))
    with tempfile.TemporaryDirectory() as tmp:
        store_roundtrip(tmp)
        history_roundtrip(tmp)
        print("store + history round trip: ok")
        if "--job" in sys.argv:
            job(tmp)
            print("job: ok")


def _has(p):
    import importlib.metadata as md
    try:
        md.version(p)
        return True
    except md.PackageNotFoundError:
        return False


if __name__ == "__main__":
    main()
