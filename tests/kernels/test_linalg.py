"""kernels.linalg against numpy's LAPACK solve and jnp's differentiation
rules: values, batching (vmap, nested, one side unbatched) and derivatives."""
import jax
import jax.numpy as jnp
import numpy as np

import kernels  # noqa: F401  (float64)
from kernels import linalg


def test_solve_equals_numpy_batched_and_unbatched():
    rng = np.random.default_rng(1)
    A = rng.normal(size=(4, 3, 9, 9))
    A[..., 0, 0] = 1e-14                               # needs row pivoting
    b = rng.normal(size=(4, 3, 9))
    ref = np.linalg.solve(A, b[..., None])[..., 0]
    np.testing.assert_allclose(linalg.solve(A[0, 0], b[0, 0]), ref[0, 0], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(jax.jit(jax.vmap(jax.vmap(linalg.solve)))(A, b), ref, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(jax.vmap(linalg.solve, (None, 0))(A[0, 0], b[:, 0]),
                               np.linalg.solve(A[0, 0], b[:, 0].T).T, rtol=1e-10, atol=1e-12)
    B = rng.normal(size=(9, 2))
    np.testing.assert_allclose(linalg.solve(A[1, 1], B), np.linalg.solve(A[1, 1], B), rtol=1e-10, atol=1e-12)


def test_solve_derivatives_equal_those_of_the_inverse():
    rng = np.random.default_rng(2)
    A, b = rng.normal(size=(3, 6, 6)), rng.normal(size=(3, 6))

    def f(solve):
        return lambda A, b: jnp.sum(jnp.sin(solve(A, b)) * jnp.arange(1.0, 7.0))
    for d in (jax.grad, jax.jacfwd):
        got = jax.vmap(d(f(linalg.solve), (0, 1)))(A, b)
        want = jax.vmap(d(f(jnp.linalg.solve), (0, 1)))(A, b)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
    # and against central differences of the value
    dA = rng.normal(size=(6, 6))
    eps = 1e-6
    fd = (f(linalg.solve)(A[0] + eps * dA, b[0]) - f(linalg.solve)(A[0] - eps * dA, b[0])) / (2 * eps)
    g = float(jnp.sum(jax.grad(f(linalg.solve))(A[0], b[0]) * dA))
    assert abs(g - float(fd)) < 1e-6 * max(1.0, abs(float(fd)))


def test_inv3_equals_numpy():
    rng = np.random.default_rng(3)
    M = rng.normal(size=(5, 3, 3)) + 3 * np.eye(3)
    np.testing.assert_allclose(linalg.inv3(M), np.linalg.inv(M), rtol=1e-12, atol=1e-14)


def test_batched_solve_is_one_call_per_variant_on_the_cpu_and_one_batched_call_elsewhere():
    """Under vmap the CPU lowering maps single LAPACK factorisations over the
    batch (a while loop around an unbatched getrf: jaxlib's batched LAPACK
    call can hang, kernels/linalg.py); a GPU lowering factorises the whole
    batch in one batched cuSOLVER call (a map there would run the matrices
    one after another: 830x slower than the block solver on an H200,
    BENCHMARKS.md "GPU"). Checked on the exported StableHLO of both
    platforms (jax.export lowers for CUDA without a GPU)."""
    rng = np.random.default_rng(1)
    A = jnp.asarray(rng.random((8, 5, 5)) + 5 * np.eye(5))
    b = jnp.asarray(rng.random((8, 5)))
    f = jax.jit(jax.vmap(linalg.solve))

    def getrf(platform):
        text = jax.export.export(f, platforms=(platform,))(A, b).mlir_module()
        calls = [ln for ln in text.splitlines() if "getrf" in ln and "custom_call" in ln]
        return text, calls

    text, calls = getrf("cpu")
    assert calls and all('num_batch_dims = "0"' in c for c in calls) and "stablehlo.while" in text
    text, calls = getrf("cuda")
    assert calls and all("cusolver" in c and 'num_batch_dims = "1"' in c for c in calls)
    assert "stablehlo.while" not in text
