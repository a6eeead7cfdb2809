"""Pure-JAX kernels for the elastokinematics of wheel suspensions.

No I/O, no Hydra. Every function here is jit/vmap/grad-safe; the only
non-traced code is the build-time validation of model tables
(:mod:`kernels.model`). Equation numbers refer to
``docs/method.md``.

Importing this package switches JAX to float64 (the system is stiff, see
method.md section 1); precision is never changed silently elsewhere.
"""
import jax

jax.config.update("jax_enable_x64", True)

from kernels.model import Model, ModelError, build_model  # noqa: E402,F401
