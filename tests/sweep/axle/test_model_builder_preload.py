"""A mirrored preload gives a symmetric equilibrium."""
import copy
import jax.numpy as jnp
import numpy as np
import pytest
import kernels  # noqa: F401  (float64)
from tests.conftest import load_model_cfg
from kernels import statics
from kernels.model import ModelError, build_model
from sweep.axle.builder import build_tables
from tests.sweep.axle.test_model_builder import PRELOAD, _preloaded_toy  # noqa: F401

pytestmark = pytest.mark.slow


def test_mirrored_preload_gives_a_symmetric_equilibrium():
    """The static equilibrium of the toy axle with a per-side preload is the
    exact mirror image left / right (with the right side's preload taken
    unchanged it was not)."""
    t = _preloaded_toy()
    model = build_model(t)
    u = jnp.zeros((2, 6)).at[:, 2].set(3000.0)
    eq = statics.static_equilibrium(model, u)
    assert bool(eq.converged)
    r = np.asarray(eq.r)
    names = [b["name"] for b in t["bodies"]]
    for name in ("arm", "wheel"):
        left, right = r[names.index(f"{name}_left")], r[names.index(f"{name}_right")]
        assert np.allclose(right, left * [1, -1, 1, -1, 1, -1], atol=1e-9), name
    # the preload moves the axle (a test that compares something)
    r0 = np.asarray(statics.static_equilibrium(build_model(build_tables(load_model_cfg("toy_trailing_arm"))), u).r)
    assert np.abs(r - r0).max() > 1e-4
