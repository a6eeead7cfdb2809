"""The store heals its own metadata (sweep/results/store.py): the consolidated copy
(``.zmetadata``) and the per-array files are written together once, so
either rebuilds the other without touching data; ``verify_store`` finds a
garbled or altered metadata file and says whether a rerun repairs it; a
chunk about to be recomputed is marked not run (status and flag). Oracle:
the data written before the damage, read back bit for bit."""
import json

import numpy as np
import pytest
import xarray as xr

from sweep.results import store as cube_store
from sweep.results.status import NOT_RUN, OK

N, CHUNK, T = 4, 2, 3


def _make(path):
    spec = {"__coords__": {"variant": (np.arange(N), {}), "time": (np.arange(T) * 0.1, {"units": "s"})},
            "toe": (("variant", "time"), (N, T), "f8", (CHUNK, T), np.nan, {"units": "rad"}),
            "status": (("variant",), (N,), "i1", (CHUNK,), NOT_RUN, {})}
    store, created = cube_store.create_store(str(path), spec, {"model": "toy"}, "identity", chunk=CHUNK)
    assert created
    rng = np.random.default_rng(0)
    values = rng.normal(size=(N, T))
    for k in range(N // CHUNK):
        a = k * CHUNK
        store.write_chunk(k, a, {"toe": values[a:a + CHUNK], "status": np.full(CHUNK, OK, "i1")})
    return values


def _reopen(path):
    return cube_store.create_store(str(path), None, None, "identity")[0]


def _garble(f):
    with open(f, "w") as fh:
        fh.write('{"shape": [4, 3], "chun')            # cut mid-write


def test_intact_store_has_no_metadata_problems(tmp_path, caplog):
    path = tmp_path / "c.zarr"
    _make(path)
    _reopen(path)
    assert "rewritten" not in caplog.text and "rebuilt" not in caplog.text, caplog.text   # nothing to repair
    assert cube_store.metadata_problems(str(path)) == []
    assert cube_store.heal_metadata(str(path)) == []
    problems, s = cube_store.verify_store(str(path))
    assert problems == [] and s["done"] == s["checked"] == 2


def test_garbled_consolidated_metadata_is_rebuilt_without_recompute(tmp_path, caplog):
    path = tmp_path / "c.zarr"
    values = _make(path)
    _garble(path / ".zmetadata")
    problems, _ = cube_store.verify_store(str(path))
    assert problems[0].startswith("metadata: .zmetadata cannot be read")
    assert problems[0].endswith("a rerun of the job repairs it from the intact copy (no recompute)")
    store = _reopen(path)                           # what a rerun does
    assert "rebuilt from the per-array metadata" in caplog.text
    assert store.done().all()                       # nothing to recompute
    assert cube_store.verify_store(str(path))[0] == []
    np.testing.assert_array_equal(xr.open_zarr(path).toe.values, values)


@pytest.mark.parametrize("damage", ["garbled", "other_shape", "deleted"])
def test_a_damaged_per_array_file_is_found_and_rewritten(tmp_path, caplog, damage):
    path = tmp_path / "c.zarr"
    values = _make(path)
    f = path / "toe" / ".zarray"
    if damage == "garbled":
        _garble(f)
    elif damage == "other_shape":                   # valid JSON that claims another shape
        meta = json.loads(f.read_text())
        meta["shape"] = [8, 3]
        f.write_text(json.dumps(meta))
    else:
        f.unlink()
    problems, _ = cube_store.verify_store(str(path))
    assert len(problems) == 1 and problems[0].startswith("metadata: toe/.zarray "), problems
    assert {"garbled": "cannot be read", "other_shape": "differs from the consolidated metadata (shape)",
            "deleted": "is missing"}[damage] in problems[0]
    assert problems[0].endswith("repairs it from the intact copy (no recompute)")
    store = _reopen(path)
    assert "toe/.zarray" in caplog.text and "rewritten from the consolidated metadata" in caplog.text
    assert store.done().all()
    assert cube_store.metadata_problems(str(path)) == []
    np.testing.assert_array_equal(xr.open_zarr(path, consolidated=False).toe.values, values)


def test_consolidated_metadata_with_the_wrong_shape_is_reported(tmp_path):
    """Both copies claiming a shape the store's variants do not have."""
    path = tmp_path / "c.zarr"
    _make(path)
    for f in (path / ".zmetadata",):
        meta = json.loads(f.read_text())
        meta["metadata"]["toe/.zarray"]["shape"] = [8, 3]
        f.write_text(json.dumps(meta))
    problems = cube_store.metadata_problems(str(path))
    assert any("toe: shape [8, 3] / chunks [2, 3] do not match the store's 4 variants" in p for p in problems)


def test_both_copies_damaged_is_not_healed_and_the_open_says_so(tmp_path):
    path = tmp_path / "c.zarr"
    _make(path)
    _garble(path / ".zmetadata")
    _garble(path / "toe" / ".zarray")
    problems, _ = cube_store.verify_store(str(path))
    assert problems and not any("repairs it" in p for p in problems)
    assert cube_store.heal_metadata(str(path)) == []
    with pytest.raises(cube_store.StoreError, match="exists but is not a readable result cube"):
        _reopen(path)


def test_a_chunk_to_recompute_is_marked_not_run_first(tmp_path):
    path = tmp_path / "c.zarr"
    values = _make(path)
    store = _reopen(path)
    store.mark_undone(1)
    ds = xr.open_zarr(path)
    np.testing.assert_array_equal(ds.status.values, [OK, OK, NOT_RUN, NOT_RUN])
    np.testing.assert_array_equal(ds.chunk_done.values, [1, 0])
    np.testing.assert_array_equal(ds.toe.values[:2], values[:2])


def test_digests_taken_while_writing_match_what_the_store_reads_back(tmp_path):
    """The digests are taken from the values as handed over (cast to the
    store's dtypes, a broadcast value widened, an array of the cube missing
    from a chunk's data read from the store), concurrently with the writes;
    oracle: the digest of each region read back from the store afterwards,
    and a chunk file altered afterwards is found by the same check."""
    path = tmp_path / "d.zarr"
    spec = {"__coords__": {"variant": (np.arange(N), {}), "time": (np.arange(T) * 0.1, {"units": "s"})},
            "toe": (("variant", "time"), (N, T), "f8", (CHUNK, T), np.nan, {"units": "rad"}),
            "camber": (("variant", "time"), (N, T), "f4", (CHUNK, T), np.nan, {"units": "rad"}),
            "iterations": (("variant",), (N,), "i4", (CHUNK,), 0, {}),
            "status": (("variant",), (N,), "i1", (CHUNK,), NOT_RUN, {})}
    store, _ = cube_store.create_store(str(path), spec, {"model": "toy"}, "identity", chunk=CHUNK)
    rng = np.random.default_rng(1)
    store.write_chunk(0, 0, {"toe": rng.normal(size=(CHUNK, T)),          # float64
                             "camber": rng.normal(size=(CHUNK, T)),       # float64 into float32
                             "iterations": np.array([3.0, 4.0]),          # floats into int32
                             "status": np.int8(OK)})                      # one value for the chunk
    store.write_chunk(1, CHUNK, {"toe": rng.normal(size=(CHUNK, T)), "status": np.full(CHUNK, OK, "i1")})
    want = np.asarray(store._integrity[:])
    for k in range(N // CHUNK):
        a, b = store.region(k)
        got = [cube_store.digest(store.group[name][a:b]) for name in store.arrays]
        assert got == [int(w) for w in want[k]]                           # camber, iterations of chunk 1: fill values
        assert store.check_chunk(k) == []
    assert list(store.group["status"][:]) == [OK] * N
    store.group["camber"][0:CHUNK] = np.zeros((CHUNK, T), "f4")          # altered after the write
    assert store.check_chunk(0) == ["camber does not match its checksum"] and store.check_chunk(1) == []
