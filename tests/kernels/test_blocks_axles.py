"""The block solver against the dense solve on the double wishbone and the multi-link (solves and trajectories), and the float32 block solver."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from kernels import blocks, linsolve
from tests.kernels.test_blocks import _axle_case, _check_axle  # noqa: F401

pytestmark = pytest.mark.slow


def test_block_and_dense_solve_agree_double_wishbone(dw_model, dw_equilibrium, step_excitation):
    from kernels import loads
    lin = _axle_case(dw_model, dw_equilibrium, loads.u_at(step_excitation, 5.0))
    _check_axle(dw_model, lin)


def _trajectories_agree(model, exc, eq):
    """Whole LSRT2 trajectories across the step (4.9-6.0 s) with either
    factorisation agree to 1e-8 relative. The block run has the static
    arguments of the validation tests, so it shares their compilation."""
    from kernels.response import Options, Problem, solve
    kw = dict(n_samples=1101, every=1, relinearise_every=1)
    a = solve(Problem(model, exc, 4.9, 1e-3), Options(**kw), eq.r)
    b = solve(Problem(model, exc, 4.9, 1e-3), Options(solver="dense", **kw), eq.r)
    for k in ("wheel_centre_displacement", "bushing_force"):
        scale = float(jnp.abs(b[k]).max())
        assert scale > 0
        np.testing.assert_allclose(a[k], b[k], rtol=1e-8, atol=1e-8 * scale)


def test_block_and_dense_trajectories_agree_double_wishbone(dw_model, step_excitation, dw_equilibrium):
    _trajectories_agree(dw_model, step_excitation, dw_equilibrium)


def test_float32_block_solver_is_float32_accurate_and_returns_float64(dw_model, dw_equilibrium, step_excitation):
    """integrator.solver=block32: the factorisation and solves of eq. (11) in
    float32 (the explicit precision option). Against numpy's float64 dense
    solve of the same mass-scaled system: a float32-level error (not the
    float64 solver's < 1e-10: it really is float32), within the
    backward-stability bound; the stage increment handed back in float64."""
    from kernels import loads
    lin = _axle_case(dw_model, dw_equilibrium, loads.u_at(step_excitation, 5.0))
    pattern = blocks.model_pattern(dw_model.topology)
    b = jax.random.normal(jax.random.PRNGKey(5), (dw_model.topology.n_dof,))
    S = linsolve.model_solver(dw_model.topology, "block32")
    x = jax.jit(lambda lin, b: S.solve(S.factor(lin, 1e-3), b))(lin, b)
    assert x.dtype == jnp.float64
    # the oracle's matrices jitted (op by op, the block assembly took most of the test's time)
    MA = np.asarray(jax.jit(lambda lin: blocks.to_dense(pattern, linsolve.block_coefficient_matrix(pattern, lin, 1e-3)))(
        lin))
    Mb = np.einsum("mij,mj->mi", np.asarray(lin.M), np.asarray(b).reshape(-1, 6)).reshape(-1)
    res = np.linalg.norm(MA @ np.asarray(x) - Mb) / np.linalg.norm(Mb)
    x64 = np.linalg.solve(MA, Mb)
    err = np.linalg.norm(np.asarray(x) - x64) / np.linalg.norm(x64)
    # the coefficient matrix is stiff (cond ~5e7): a float32 LU gives
    # err 5.2e-4, res 2.3e-4 relative (measured 2026-11-25; bounds ~3x),
    # inside the backward-stable bound cond * eps32; the float64 solver gives
    # < 1e-10 (test above). The whole-trajectory cost is far smaller (NMSE
    # change 2e-12, BENCHMARKS.md): the error sits in the stiff components,
    # which the L-stable method damps.
    assert 1e-9 < err < 1.5e-3 and err < np.linalg.cond(MA) * np.finfo(np.float32).eps, err
    assert res < 7e-4, res
