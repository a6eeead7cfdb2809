"""The generic multi-start optimiser (sweep/tune/optimiser.py) on a small
analytic problem: L-BFGS and Adam reach the known minimum, and the
optimisation step goes through the trace cache (a second process with the
same problem loads the traced program instead of tracing it; its results
are bitwise those of the traced one)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import kernels  # noqa: F401  (float64)
from sweep.tune import optimiser

A = np.array([[3.0, 0.5], [0.5, 1.0]])
X_STAR = np.array([1.3, 0.7])               # the minimum of the tracking objective, in theta


class _Pset:
    names = ["a", "b"]


class Quadratic:
    """J(z) = w (theta(z) - X_STAR)^T A (theta(z) - X_STAR), theta in (0, 3)
    by a sigmoid; one response y = theta_0 (target 1.3)."""

    def __init__(self, key="quadratic"):
        self.pset, self.key = _Pset(), key
        self.response_labels = [("a", "1")]

    def theta(self, z):
        return 3.0 * jax.nn.sigmoid(z)

    def z_of(self, theta):
        w = np.asarray(theta, float) / 3.0
        return np.log(w) - np.log1p(-w)

    def objective(self, z, w):
        d = self.theta(z) - X_STAR
        return w[0] * d @ jnp.asarray(A) @ d, self.theta(z)[:1]

    def data(self):
        return (np.array([1.0]),)

    def probe_data(self, i):
        return self.data()

    def next_round(self, data, y):
        return None

    def signature(self):
        return f"Quadratic {self.key}"

    def trace_key(self):
        return self.key


@pytest.fixture
def trace_cache(tmp_path):
    old = jax.config.jax_compilation_cache_dir
    jax.config.update("jax_compilation_cache_dir", str(tmp_path))
    optimiser._STEPS.clear()
    yield tmp_path
    optimiser._STEPS.clear()
    jax.config.update("jax_compilation_cache_dir", old)


@pytest.mark.parametrize("name", ["lbfgs", "adam"])
def test_multistart_optimiser_reaches_the_minimum(name, monkeypatch, trace_cache):
    monkeypatch.setattr(optimiser, "start_points", lambda problem, oc, names: [np.array([0.4, 2.5]),
                                                                               np.array([2.0, 0.2])])
    oc = {"name": name, "iterations": 400 if name == "adam" else 60, "learning_rate": 0.2, "gtol": 1e-10}
    hist = optimiser.optimise(Quadratic(), oc, progress=False)
    assert hist["theta"].shape[1:] == (2, 2)
    np.testing.assert_allclose(hist["theta"][-1], np.tile(X_STAR, (2, 1)), atol=1e-3 if name == "adam" else 1e-8)
    J = hist["objective"]
    if name == "lbfgs":
        assert np.all(np.diff(J, axis=0) <= 0)                  # monotone: the best accepted point


def test_the_optimisation_step_goes_through_the_trace_cache(monkeypatch, trace_cache):
    """First use: traced and stored; the same problem again (the in-process
    cache of compiled steps cleared, as in a new process): loaded, same
    numbers bitwise; another key: traced again."""
    monkeypatch.setattr(optimiser, "start_points", lambda problem, oc, names: [np.array([0.4, 2.5])])
    oc = {"name": "lbfgs", "iterations": 5}
    first = optimiser.optimise(Quadratic(), oc, progress=False)
    step = optimiser.compiled_step(Quadratic(), oc)[1][0]
    assert step.loaded is False
    # one program for every iteration: the first call's fresh arrays and the
    # later calls' outputs of the step lower alike (one jit cache entry)
    (fn,) = step.fns.values()
    assert fn._cache_size() == 1
    assert list((trace_cache / "axle-traces").glob("*.jaxexport"))
    optimiser._STEPS.clear()
    second = optimiser.optimise(Quadratic(), oc, progress=False)
    assert optimiser.compiled_step(Quadratic(), oc)[1][0].loaded is True
    np.testing.assert_array_equal(first["objective"], second["objective"])
    np.testing.assert_array_equal(first["theta"], second["theta"])
    optimiser._STEPS.clear()
    optimiser.optimise(Quadratic("another"), oc, progress=False)
    assert optimiser.compiled_step(Quadratic("another"), oc)[1][0].loaded is False
