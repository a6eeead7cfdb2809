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
