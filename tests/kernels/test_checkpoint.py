"""Reverse mode through LSRT2 with checkpointed blocks (the mechanism of the
tuner's time-response gradients, ``checkpoint_block``): its compiled
working memory is bounded.

The memory is a property of the time loop (``kernels.integrate.simulate``:
a scan over ``jax.checkpoint``-ed blocks), not of the model, so it is
measured on a small nonlinear system (one body, cubic springs: the
linearisation changes every step, so reverse mode has to keep it per step
unless the blocks are recomputed) - seconds to compile instead of minutes
for an axle. The axle's own gradients through the checkpointed loop are
checked against central differences in tests/sweep/test_tune.py."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import kernels  # noqa: F401  (float64)
from kernels import integrate
from kernels.dynamics import Linearisation
from kernels.lsrt2 import LSRT2

pytestmark = pytest.mark.slow

_rng = np.random.default_rng(1)
_A = _rng.normal(size=(6, 6))
OMEGA = _A @ _A.T + 6 * np.eye(6)          # s.p.d. stiffness per unit mass, 1/s^2
CDAMP = 0.3 * np.eye(6) + 0.05 * OMEGA      # damping per unit mass, 1/s
CUBIC = 50.0                                # cubic spring per unit mass, 1/(m^2 s^2)


def cubic_system(s):
    """d r/dt = v, d v/dt = -s Omega r - CUBIC r^3 - C v + u(t) (K = I):
    a 6-DOF body whose Jacobian J_r depends on the state."""
    Om = s * jnp.asarray(OMEGA)
    C = jnp.asarray(CDAMP)

    def u(t):
        return jnp.where(t >= 0.01, 3.0, 0.0) * jnp.ones(6)

    def q(r, v, u_):
        return -Om @ r - CUBIC * r ** 3 - C @ v + u_

    def lin(r, v, u_):
        J_r = -Om - jnp.diag(3 * CUBIC * r ** 2)
        return Linearisation(q(r, v, u_), J_r, -C, jnp.eye(6), jnp.eye(6)[None])

    return integrate.System(linearise=lin, q=q, rates=lambda r, v: v, u=u,
                            du=lambda t: jnp.zeros(6))


def test_checkpointed_reverse_pass_needs_bounded_memory():
    """Reverse mode through ``LSRT2.simulate(..., checkpoint_block=B)``
    (compiled working memory of the gradient, XLA's memory analysis): with
    the whole run as one block every step's linearisation and LU are kept;
    blocks of sqrt(n) steps keep a small fraction of that."""
    def temp_bytes(n, block):
        def f(s):
            out = LSRT2.simulate(cubic_system(s), jnp.full(6, 0.01), jnp.zeros(6), 0.0, 1e-3, n + 1,
                                 output_fn=lambda r, v, t: r[2], checkpoint_block=block)
            return jnp.sum(out.outputs ** 2)
        c = jax.jit(jax.grad(f)).lower(1.0).compile()
        mem = c.memory_analysis()
        if mem is None:
            pytest.skip("memory analysis not available on this backend")
        return mem.temp_size_in_bytes
    n = 1600
    full, ck = temp_bytes(n, n), temp_bytes(n, 40)
    # one block keeps every step's linearisation, LU and stage values: at
    # least ~n * (J_r, LU of 6x6) = 1600 * 2 * 288 B; blocks of sqrt(n)
    # keep n / 40 block-boundary states and one block's working set
    assert full > n * 2 * 36 * 8
    assert ck < 0.1 * full


def test_checkpointed_gradient_equals_the_plain_one_and_central_differences():
    """The checkpointed reverse pass recomputes the blocks: its gradient is
    the plain reverse pass's (to round-off) and the central difference's."""
    n = 200

    def f(s, block):
        out = LSRT2.simulate(cubic_system(s), jnp.full(6, 0.01), jnp.zeros(6), 0.0, 1e-3, n + 1,
                             output_fn=lambda r, v, t: r[2], checkpoint_block=block)
        return jnp.sum(out.outputs ** 2)
    g_ck = float(jax.jit(jax.grad(lambda s: f(s, 20)))(1.0))
    g_plain = float(jax.jit(jax.grad(lambda s: f(s, None)))(1.0))
    fj = jax.jit(lambda s: f(s, None))
    d = 1e-5
    fd = (float(fj(1.0 + d)) - float(fj(1.0 - d))) / (2 * d)
    assert g_ck == pytest.approx(g_plain, rel=1e-12)
    assert g_ck == pytest.approx(fd, rel=1e-6)
    assert abs(g_ck) > 0
