"""The start-up values a rerun loads from the trace cache (``sweep.core.tracecache.memo``):
the design's unit sample and the output channels' shapes. Oracles: scipy's own
sampler and a fresh trace of the channel functions."""
import os

import numpy as np
import pytest

from sweep.study import design
from sweep.core import tracecache


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setattr(tracecache, "cache_path", lambda key: os.path.join(tmp_path, key + ".jaxexport"))
    return tmp_path


class _Params:
    """The two members of a parameter set that :func:`sweep.study.design.make_design` uses."""

    def __init__(self, k):
        self.k = k
        self.nominal = np.full(k, 0.5)

    def __len__(self):
        return self.k

    def from_unit(self, Z):
        return 10.0 * np.asarray(Z)


@pytest.mark.parametrize("kind", ["lhs", "sobol"])
def test_a_rerun_loads_the_design_sample_and_equals_scipy(cache, monkeypatch, kind):
    from scipy.stats import qmc
    cfg = {"design": kind, "n_variants": 16, "seed": 3}
    first = design.make_design(cfg, _Params(3))
    sampler = qmc.LatinHypercube(d=3, seed=3) if kind == "lhs" else qmc.Sobol(d=3, scramble=True, seed=3)
    np.testing.assert_array_equal(first, 10.0 * sampler.random(16))
    assert len(list(cache.glob("*.pkl"))) == 1

    def fail(*a):
        raise AssertionError("sampled again although the cache holds the sample")
    monkeypatch.setattr(design, "_qmc_unit", fail)
    np.testing.assert_array_equal(design.make_design(cfg, _Params(3)), first)
    with pytest.raises(AssertionError, match="sampled again"):        # another seed is another entry
        design.make_design({**cfg, "seed": 4}, _Params(3))


def test_memo_computes_when_the_cache_is_off_and_heals_a_damaged_entry(cache, monkeypatch):
    calls = []

    def compute():
        calls.append(1)
        return {"x": (2, 3)}
    assert tracecache.memo("t", (1, "a"), compute) == {"x": (2, 3)}
    assert tracecache.memo("t", (1, "a"), compute) == {"x": (2, 3)} and len(calls) == 1
    assert tracecache.memo("t", (1, "b"), compute) == {"x": (2, 3)} and len(calls) == 2
    assert len(list(cache.glob("*.pkl"))) == 2
    for p in cache.glob("*.pkl"):
        p.write_bytes(b"not a pickle")
    assert tracecache.memo("t", (1, "a"), compute) == {"x": (2, 3)} and len(calls) == 3
    assert tracecache.memo("t", (1, "a"), compute) == {"x": (2, 3)} and len(calls) == 3   # healed
    monkeypatch.setattr(tracecache, "cache_path", lambda key: None)
    tracecache.memo("t", (1, "a"), compute)
    assert len(calls) == 4


def test_channel_shapes_from_the_cache_equal_a_fresh_trace(cache, dw_model, monkeypatch):
    from sweep.engine import layout
    from sweep.kinds import time_response
    fresh = time_response.channel_shapes(dw_model, [0, 3])
    assert fresh["bushing_force"][0] == 2

    def fail(*a, **k):
        raise AssertionError("traced again")
    monkeypatch.setattr(layout, "channel_shapes", fail)
    assert time_response.channel_shapes(dw_model, [0, 3]) == fresh
    with pytest.raises(AssertionError, match="traced again"):     # other bushings: another entry
        time_response.channel_shapes(dw_model, [0, 3, 5])
