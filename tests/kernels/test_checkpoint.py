"""Reverse mode through LSRT2 with checkpointed blocks (the gradients of the
tuner's time-response objectives): its compiled working memory is bounded.
Apart from tests/sweep/test_tune.py so that it is scheduled on its own (its
two compilations are minutes on 2 cores)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import kernels  # noqa: F401  (float64)


def test_checkpointed_reverse_pass_needs_bounded_memory():
    """Reverse mode through ``LSRT2.simulate(..., checkpoint_block=B)``
    (compiled working memory of the gradient, XLA's memory analysis): with
    the whole run as one block every step's linearisation and LU are kept;
    blocks of sqrt(n) steps keep a small fraction of that."""
    from kernels import loads
    from kernels.lsrt2 import LSRT2
    from kernels.model import build_model
    from tests.conftest import single_mount_tables
    from kernels.system import model_system
    import dataclasses
    model = build_model(single_mount_tables())
    exc = loads.excitation(np.zeros((2, 6)), [(0.01, 0.0, np.full((2, 6), 3.0))])

    def temp_bytes(n, block):
        def f(s):
            m = dataclasses.replace(model, bu_k_scale=model.bu_k_scale * s)
            out = LSRT2.simulate(model_system(m, exc, "dense"), m.r_design.reshape(-1), jnp.zeros(6), 0.0,
                                 1e-3, n + 1, output_fn=lambda r, v, t: r[2], checkpoint_block=block)
            return jnp.sum(out.outputs ** 2)
        c = jax.jit(jax.grad(f)).lower(1.0).compile()
        mem = c.memory_analysis()
        if mem is None:
            pytest.skip("memory analysis not available on this backend")
        return mem.temp_size_in_bytes
    n = 1600
    full, ck = temp_bytes(n, n), temp_bytes(n, 40)
    # one block keeps every step's linearisation, LU and stage values: at
    # least ~n * (J_r, J_v, LU of 6x6) = 1600 * 3 * 288 B; blocks of sqrt(n)
    # keep n / 40 block-boundary states and one block's working set
    assert full > n * 3 * 36 * 8
    assert ck < 0.1 * full
