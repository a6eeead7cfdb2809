"""Gradients of K&C metrics with respect to hardpoint offsets and bushing
rates together (issue: hardpoints as tuning variables).

The model build that moves a hardpoint is host code; its derivative comes
from central differences of the build (:func:`sweep.engine.values.differentiable_values`),
everything after it (design position, K&C metrics) from JAX. The oracle is
the whole pipeline differenced: each evaluation rebuilds the model with the
moved point and solves the K&C problem afresh, so an error in the
geometry derivative, its chain with the solver's derivative or the
implicit differentiation of the equilibrium shows. The toy axle's check
(forward mode, five metrics; slow tier: the fast tier checks the build's
derivative alone, tests/sweep/engine/test_values.py); the double wishbone's (the outer
tie-rod point and a bushing rate, reverse mode: every response's gradient
in one pass, python -m sweep.tune's gradient check) runs with the tuning
example in tests/e2e/test_tune_hardpoint_example.py."""
import jax
import jax.numpy as jnp
import numpy as np

import pytest

import kernels  # noqa: F401  (float64)
from tests.sweep.tune.test_tune import tune_cfg

pytestmark = pytest.mark.slow

METRICS = ("bump_steer", "camber_gain", "wheel_rate", "lateral_force_steer", "design_roll_centre_height")


def problem(model, hardpoint, bushing):
    from sweep.tune.problem import TuneProblem
    cfg = tune_cfg(f"model={model}", "~parameters", "~objectives",
                   f"+parameters.h={{target: hardpoint, {hardpoint}}}",
                   f"+parameters.k={{target: bushing.stiffness, {bushing}, bounds: [0.5, 2.0], scale: log}}",
                   *[f"+objectives.{m}={{metric: {m}, target: 1.0}}" for m in METRICS])
    return TuneProblem(cfg)


def metrics_fn(p):
    def f(theta):
        vals, ok = p.responses(theta)
        return jnp.stack([vals[m] for m in METRICS]), ok
    return f


def check_against_central_differences(p, theta0, steps, rtol):
    """Forward-mode tangents of the metrics along each parameter against
    central differences of the rebuilt and re-solved axle."""
    f = metrics_fn(p)
    jvp = jax.jit(lambda th, d: jax.jvp(lambda t: f(t)[0], (th,), (d,)))
    theta0 = jnp.asarray(theta0)
    y0, _ = jvp(theta0, jnp.zeros_like(theta0))
    assert np.all(np.isfinite(y0))
    jac = []
    for i, h in enumerate(steps):
        e = jnp.zeros_like(theta0).at[i].set(1.0)
        _, dy = jvp(theta0, e)
        yp, _ = jvp(theta0 + h * e, e)
        ym, _ = jvp(theta0 - h * e, e)
        fd = (np.asarray(yp) - np.asarray(ym)) / (2 * h)
        err = np.abs(np.asarray(dy) - fd)
        tol = rtol * np.abs(fd) + 1e-6 * np.abs(np.asarray(y0))
        assert np.all(err <= tol), (p.pset.names[i], dict(zip(METRICS, zip(np.asarray(dy), fd))))
        jac.append(fd)
    return np.stack(jac, 1)


def test_toy_axle_metric_gradients_wrt_a_hardpoint_and_a_bushing_rate_equal_central_differences():
    p = problem("toy_trailing_arm", "points: [PR], axis: z, bounds: [-0.02, 0.02]",
                "elements: 'pivot_front_*', directions: [y]")
    jac = check_against_central_differences(p, [0.005, 1.3], steps=(1e-4, 1e-4), rtol=2e-4)
    # the rear pivot's height does move the axle's kinematics (a build that
    # ignored the offset would pass the comparison above with 0 = 0):
    # bump steer ~ 390 deg/m per m, roll centre ~ 2300 mm per m
    assert abs(jac[METRICS.index("bump_steer"), 0]) > 100
    assert abs(jac[METRICS.index("design_roll_centre_height"), 0]) > 1000
