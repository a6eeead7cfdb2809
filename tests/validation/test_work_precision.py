"""benchmarks/work_precision.py on the toy axle: one short run of its core
(LSRT2, h = 1 and 0.5 ms, 30 ms around the longitudinal step; ~1 min, most
of it compiling) - the result
structure, the written files, and LSRT2's NMSE falling with h as order 2."""
import importlib.util
import json
import math
import os
import sys

import pytest

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository root


@pytest.fixture(scope="module")
def wp():
    spec = importlib.util.spec_from_file_location(
        "work_precision", os.path.join(ROOT, "benchmarks", "work_precision.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("work_precision", mod)     # its dataclass looks its module up
    spec.loader.exec_module(sys.modules["work_precision"])
    return mod


@pytest.fixture(scope="module")
def result(wp):
    return wp.work_precision(["toy_trailing_arm"], ["lsrt2"], [1.0, 0.5], [1], repeat=1,
                             t_start=4.995, t_end=5.025, window=(4.995, 5.025), ref_rtol=1e-7,
                             log=lambda s: None)   # rtol 1e-7: 20x faster here, still << the errors


def test_structure_and_files(wp, result, tmp_path):
    rows = result["entries"]
    assert [(r["h_ms"], r["relinearise_every"]) for r in rows] == [(0.5, 1), (1.0, 1)]
    for r in rows:
        assert r["status"] == "ok", r.get("traceback", r["status"])
        assert r["axle"] == "toy_trailing_arm" and r["method"] == "lsrt2"
        assert r["steps"] == round(0.03 / (r["h_ms"] * 1e-3))
        for k in ("nmse_displacement", "nmse_force", "us_per_step", "wall_s_per_simulated_s", "compile_s"):
            assert math.isfinite(r[k]) and r[k] > 0, k
    assert result["references"]["toy_trailing_arm"]["samples"] == 61
    res = dict(result, machine={"cpu": "test"}, date="today")
    paths = wp.write_outputs(res, str(tmp_path), "wp", "python benchmarks/work_precision.py --test")
    assert all(os.path.getsize(p) > 0 for p in paths)
    with open(paths[0]) as f:
        assert len(json.load(f)["entries"]) == 2
    with open(paths[1]) as f:
        md = f.read()
    assert "| toy_trailing_arm | lsrt2 | 0.5 | 1 |" in md and "--test" in md
    # a hand-written section survives a rewrite
    with open(paths[1], "a") as f:
        f.write("\n## Which method when\n\nkeep me\n")
    wp.write_outputs(res, str(tmp_path), "wp", "cmd")
    with open(paths[1]) as f:
        assert "keep me" in f.read()


def test_lsrt2_nmse_falls_as_order_two_when_h_halves(result):
    by_h = {r["h_ms"]: r for r in result["entries"]}
    for key in ("nmse_displacement", "nmse_force"):
        ratio = by_h[1.0][key] / by_h[0.5][key]
        # order 2: error / 4, NMSE (squared) / 16; order 1 would give 4
        assert 8.0 < ratio < 32.0, f"{key}: NMSE(1 ms) / NMSE(0.5 ms) = {ratio:.2f}"


def test_shards_partition_the_combinations_and_merge_back(wp, tmp_path):
    """``--shard K/N`` gives every combination to exactly one process and
    ``--merge`` puts the diagram back together (rows of finished runs: no
    compile here)."""
    combos = [(m, h, n) for m in ("lsrt2", "ros34pw2") for h in (0.5, 1.0) for n in (1, 2)]
    done = [{"axle": "toy_trailing_arm", "method": m, "h_ms": h, "relinearise_every": n, "run_s": [1.0],
             "status": "ok", "nmse_displacement": h * 1e-6 * n, "nmse_force": h * 2e-6 * n,
             "us_per_step": 100.0, "wall_s_per_simulated_s": 0.1 / h, "steps": 10} for m, h, n in combos]
    parts, seen = [], []
    for k in range(3):
        res = wp.work_precision(["toy_trailing_arm"], ["lsrt2", "ros34pw2"], [1.0, 0.5], [1, 2], repeat=1,
                                loadcase="pothole", done=done, shard=(k, 3), log=lambda s: None)
        assert res["direction"] == 2                       # the pothole's signals are vertical
        seen += [(e["method"], e["h_ms"], e["relinearise_every"]) for e in res["entries"]]
        p = tmp_path / f"part{k}.json"
        p.write_text(json.dumps(dict(res, machine={"cpu": "test"}, wall_min=float(k), command=f"shard {k}",
                                     t_start=0.0, t_end=0.6, window=[0.0, 0.6])))
        parts.append(str(p))
    assert sorted(seen) == sorted(combos)                   # each exactly once
    out = str(tmp_path / "merged.json")
    assert wp.merge_main([out, *parts]) == 0
    with open(out) as f:
        merged = json.load(f)
    assert len(merged["entries"]) == len(combos) and merged["processes"] == 3 and merged["wall_min"] == 2.0
    assert merged["methods"] == ["lsrt2", "ros34pw2"] and merged["relinearise_every"] == [1, 2]
    with open(out[:-5] + ".md") as f:
        assert "vertical wheel-centre" in f.read()
    assert os.path.getsize(out[:-5] + ".png") > 0
