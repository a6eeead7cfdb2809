"""The gradient through an LSRT2 integration against finite differences, and the float32 option."""
import math
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.linalg import expm
import kernels  # noqa: F401
from kernels import integrate
from kernels.lsrt2 import LSRT2
from kernels.dynamics import Linearisation
from tests.kernels.test_lsrt2 import _SIMULATE, run  # noqa: F401

pytestmark = pytest.mark.slow


def test_gradient_through_the_integration_matches_finite_differences():
    """lax.scan + LU are differentiable: d(final state)/d(stiffness scale) by reverse
    mode equals central differences."""
    from kernels import loads
    from kernels.model import build_model
    from tests.conftest import single_mount_tables
    from kernels.system import model_system
    model = build_model(single_mount_tables())
    exc = loads.excitation(np.zeros((2, 6)))

    def final_z(scale):
        m = model.replace_elements(bushing={"k_scale": model.elements["bushing"]["k_scale"] * scale})
        out = LSRT2.simulate(model_system(m, exc), m.r_design.reshape(-1), jnp.zeros(6), 0.0, 1e-3, 51)
        return out.outputs["r"][-1, 2] + 0.3 * out.outputs["r"][-1, 4]

    # one program: the central difference takes the primal values only
    vg = jax.jit(jax.value_and_grad(final_z))
    g = vg(1.3)[1]
    eps = 1e-5
    fd = (vg(1.3 + eps)[0] - vg(1.3 - eps)[0]) / (2 * eps)
    assert abs(float(fd)) > 1e-6
    np.testing.assert_allclose(g, fd, rtol=1e-6)


def test_float32_option_runs_in_float32_and_stays_close_to_float64():
    """The float32 speed option (every float leaf of model, excitation and
    state cast, as benchmarks/run.py does): the integration stays in float32
    (no silent promotion back to float64 by constants in the kernels) and
    follows the float64 trajectory of a step response to float32 accuracy."""
    from kernels import loads
    from kernels.model import build_model, cast_floats
    from kernels.system import model_system
    from tests.conftest import single_mount_tables
    model = build_model(single_mount_tables())
    exc = loads.excitation(np.zeros((2, 6)), [(0.01, 0.0, np.full((2, 6), 20.0))])

    def run(m, e, r0):
        return LSRT2.simulate(model_system(m, e), r0, jnp.zeros_like(r0), 0.0, 1e-3, 60).outputs["r"]

    r0 = model.r_design.reshape(-1)
    ref = np.asarray(jax.jit(run)(model, exc, r0))
    m32, e32, r32 = cast_floats((model, exc, r0), jnp.float32)
    y = jax.jit(run)(m32, e32, r32)
    assert y.dtype == jnp.float32
    dz = ref[:, 2] - ref[0, 2]
    assert np.ptp(dz) > 1e-4                      # the step moves the body
    np.testing.assert_allclose(np.asarray(y[:, 2], np.float64) - float(y[0, 2]), dz, atol=1e-5 * np.ptp(dz) + 2e-7)
