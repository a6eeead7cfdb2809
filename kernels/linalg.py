"""Dense linear solves that never make a batched LAPACK call.

Why not ``jnp.linalg.solve`` / ``jax.scipy.linalg.lu_factor`` under
``vmap``: on the CPU they call LAPACK through jaxlib, and jaxlib 0.10.x
spreads a *batched* LAPACK call over XLA's intra-op thread pool and blocks
the calling pool thread until its pieces are done. When as many such calls
run at once as the pool has threads - the pool has one thread per usable
core, and XLA runs independent operations concurrently - every pool thread
waits for work that no thread is left to run: the process hangs at 0 % CPU
(the observed hangs and the jaxlib versions tried: CHANGELOG.md, 2026-11-25,
"Fixed"; BENCHMARKS.md, "Micro-batching").

So every solve in the kernels goes through :func:`solve`: under ``vmap``
on the CPU it becomes a ``lax.map`` of single (unbatched) LAPACK solves
(``jax.custom_batching.custom_vmap``) - the same work, one matrix at a
time, measured as fast as the batched call (the batched LAPACK kernel also
loops over the matrices) - and it differentiates as the exact inverse
(``lax.custom_linear_solve``: tangents and cotangents are solves with A
and A^T). The 3 x 3 inverses of the body inertia tensors are in closed
form (:func:`inv3`). ``jnp.linalg.eig`` (kernels.modes) is only called
unbatched by the sweep (sweep/kinds/modal_analysis.py maps variants one by one).
"""
import jax
import jax.numpy as jnp


def _one_at_a_time(f):
    """``f`` whose ``vmap`` is, on the CPU, a ``lax.map`` over the batch
    (nested vmaps too): every LAPACK call sees unbatched arguments. On other
    platforms (GPU) the batch stays one batched call of ``f``: there a
    ``lax.map`` would run the matrices one after another, each a few small
    kernels (measured on an H200: 598 us per 144 x 144 double-wishbone solve
    at batch 1024, against 393 us on 2 CPU cores; BENCHMARKS.md, "GPU").
    The platform is chosen when the program is lowered
    (``lax.platform_dependent``), so a program traced once runs right on
    either."""
    g = jax.custom_batching.custom_vmap(f)

    @g.def_vmap
    def _rule(axis_size, in_batched, *args):
        args = tuple(a if batched else jnp.broadcast_to(a, (axis_size,) + jnp.shape(a))
                     for a, batched in zip(args, in_batched))
        out = jax.lax.platform_dependent(
            *args,
            cpu=lambda *a: jax.lax.map(lambda xs: g(*xs), a),
            default=lambda *a: jax.vmap(f)(*a))
        return out, True
    return g


_lapack_solve = _one_at_a_time(jnp.linalg.solve)


def solve(A, b):
    """A^-1 b for A (n, n), b (n,) or (n, k): ``jnp.linalg.solve`` without
    batched LAPACK calls (module docstring); derivatives as of the exact
    inverse, with respect to A and b."""
    A0 = jax.lax.stop_gradient(A)
    return jax.lax.custom_linear_solve(
        lambda x: A @ x, b,
        solve=lambda _, r: _lapack_solve(A0, r),
        transpose_solve=lambda _, r: _lapack_solve(A0.T, r))


def inv3(A):
    """Inverse of 3 x 3 matrices (..., 3, 3) by the adjugate (closed form)."""
    a, b, c = A[..., 0, 0], A[..., 0, 1], A[..., 0, 2]
    d, e, f = A[..., 1, 0], A[..., 1, 1], A[..., 1, 2]
    g, h, i = A[..., 2, 0], A[..., 2, 1], A[..., 2, 2]
    co = jnp.stack([jnp.stack([e * i - f * h, c * h - b * i, b * f - c * e], -1),
                    jnp.stack([f * g - d * i, a * i - c * g, c * d - a * f], -1),
                    jnp.stack([d * h - e * g, b * g - a * h, a * e - b * d], -1)], -2)
    det = a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g)
    return co / det[..., None, None]
