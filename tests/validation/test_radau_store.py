"""tests/radau_store.py: a stored Radau reference is read back only while it
solves the problem posed now; a changed model, start, time grid or tolerance
is solved again (with a warning), never answered from the store."""
import numpy as np
import pytest

import kernels  # noqa: F401  (float64)
from kernels import loads
from kernels.model import build_model
from tests import radau_store
from tests.conftest import single_mount_tables

pytestmark = pytest.mark.slow   # a check of the test suite's own store: the full tier


def _problem(k_scale=1.0):
    tables = single_mount_tables()
    tables["bushings"][0]["stiffness"] = [k * k_scale for k in tables["bushings"][0]["stiffness"]]
    model = build_model(tables)
    u0 = np.zeros((2, 6))
    amp = np.zeros((2, 6))
    amp[:, 2] = 50.0
    exc = loads.excitation(u0, [(0.01, 0.0, amp)])
    r0 = np.asarray(model.r_design)
    return model, exc, r0, np.zeros_like(r0), np.linspace(0.0, 0.05, 51)


def test_a_stale_reference_is_solved_again_never_used(tmp_path, monkeypatch):
    monkeypatch.setattr(radau_store, "STORE", str(tmp_path))
    model, exc, r0, v0, t = _problem()
    monkeypatch.setenv("AXLE_STORE_REFERENCES", "1")
    _, r_stored, _ = radau_store.radau_reference("mount", model, exc, r0, v0, t, rtol=1e-8)
    monkeypatch.delenv("AXLE_STORE_REFERENCES")
    calls = []
    import kernels.radau as kr
    real = kr.solve
    monkeypatch.setattr(kr, "solve", lambda *a, **k: calls.append(1) or real(*a, **k))
    # the same problem: read back, nothing solved
    _, r, _ = radau_store.radau_reference("mount", model, exc, r0, v0, t, rtol=1e-8)
    assert calls == [] and np.array_equal(r, r_stored)
    # a stiffer bushing (the right-hand side differs along the stored trajectory)
    stiff = _problem(1.5)[0]
    with pytest.warns(UserWarning, match="right-hand side"):
        _, r2, _ = radau_store.radau_reference("mount", stiff, exc, r0, v0, t, rtol=1e-8)
    assert calls == [1] and not np.allclose(r2, r_stored, rtol=0, atol=1e-9)
    # another tolerance, another output grid, another start
    with pytest.warns(UserWarning, match="tolerances"):
        radau_store.radau_reference("mount", model, exc, r0, v0, t, rtol=1e-9)
    with pytest.warns(UserWarning, match="output times"):
        radau_store.radau_reference("mount", model, exc, r0, v0, t[:-1], rtol=1e-8)
    with pytest.warns(UserWarning, match="start state"):
        radau_store.radau_reference("mount", model, exc, r0 + 1e-6, v0, t, rtol=1e-8)
    assert len(calls) == 4
