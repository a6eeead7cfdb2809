"""Figures in README.md and BENCHMARKS.md come from recorded benchmark
results: each generated block between ``<!-- bench:NAME:begin/end -->``
markers equals what its benchmark renders from its results JSON (a figure
copied by hand, or a JSON re-measured without the documents regenerated,
fails here)."""
import importlib.util
import json
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bench_module(name):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", os.path.join(ROOT, "benchmarks", f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def block(path, begin, end):
    with open(os.path.join(ROOT, path)) as f:
        s = f.read()
    assert begin in s and end in s, f"{path}: no generated block {begin}"
    return s[s.index(begin) + len(begin):s.index(end)].strip()


@pytest.mark.parametrize("doc", ["README.md", "BENCHMARKS.md"])
def test_rerun_figures_are_the_recorded_ones(doc):
    reruns = bench_module("reruns")
    with open(reruns.RESULTS) as f:
        result = json.load(f)
    assert block(doc, reruns.BEGIN, reruns.END) == reruns.table(result).strip()
    assert set(result["cases"]) == set(reruns.LABELS)
