"""An added element group on the double wishbone: zero stiffness reproduces the axle, a torsion spring equals the rotational bushing, its equilibrium torque, its Jacobian against central differences."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import kernels  # noqa: F401  (float64)
from kernels import blocks, dynamics
from tests.conftest import random_state
from tests.kernels.test_element_registry import CHANNELS, C_TORSION, K_TORSION, NAME, TABLE, TORSION, dw_cfg, equilibrium, slots, tor_model, tor_tables, torsion_build, torsion_element, torsion_group, torsion_validate  # noqa: F401

pytestmark = pytest.mark.slow


def test_element_jacobian_autodiff_equals_central_differences(tor_model):
    """The group has no closed-form Jacobian: kernels.dynamics differentiates
    the element (forward mode, eq. 5). Element level and model level (the
    block linearisation of the axle) against central differences."""
    prm = jax.tree_util.tree_map(lambda a: a[0], tor_model.elements[NAME])
    rng = np.random.default_rng(3)
    x1 = jnp.asarray(np.concatenate([rng.normal(0, 0.1, 3), rng.normal(0, 0.3, 3), rng.normal(0, 1.0, 6)]))
    x2 = jnp.asarray(np.concatenate([rng.normal(0, 0.1, 3), rng.normal(0, 0.3, 3), rng.normal(0, 1.0, 6)]))
    (g1, g2), d1, d2 = dynamics.element_jac(torsion_element, (0, 1))(prm, x1, x2)
    eps = 1e-6
    for b, d in ((0, d1), (1, d2)):
        fd = np.zeros((2, 6, 12))
        for k in range(12):
            e = np.zeros(12)
            e[k] = eps
            xs_p, xs_m = [x1, x2], [x1, x2]
            xs_p[b], xs_m[b] = xs_p[b] + e, xs_m[b] - e
            gp, gm = torsion_element(prm, *xs_p), torsion_element(prm, *xs_m)
            fd[:, :, k] = (np.stack(gp) - np.stack(gm)) / (2 * eps)
        np.testing.assert_allclose(np.stack(d), fd, rtol=1e-7, atol=1e-7 * np.abs(fd).max())
    # model level: the group's share of the block linearisation (the model
    # minus the same model with k = c = 0: same topology, same other
    # elements) in the four blocks of the left spring's bodies equals central
    # differences of the element at the bodies' states
    r, v = random_state(tor_model, seed=5)
    u = jnp.zeros((2, 6))
    lin_fn = jax.jit(dynamics.linearise_blocks)
    lin, lin0 = lin_fn(tor_model, r, v, u), lin_fn(dataclasses_replace_elements(tor_model, k=0.0, c=0.0), r, v, u)
    pattern = blocks.model_pattern(tor_model.topology)
    i, j = slots(tor_model, "upper_arm_left", "lower_link_left")
    x = dynamics.states_with_ground(r, v)
    for b, col in ((0, i), (1, j)):
        fd = np.zeros((2, 6, 12))
        for k in range(12):
            e = np.zeros(12)
            e[k] = eps
            xs_p, xs_m = [x[i], x[j]], [x[i], x[j]]
            xs_p[b], xs_m[b] = xs_p[b] + e, xs_m[b] - e
            fd[:, :, k] = (np.stack(torsion_element(prm, *xs_p)) - np.stack(torsion_element(prm, *xs_m))) / (2 * eps)
        for a_, row in ((0, i), (1, j)):
            s_ = pattern.slot(row, col)
            got = np.concatenate([np.asarray(lin.G_r[s_] - lin0.G_r[s_]), np.asarray(lin.G_v[s_] - lin0.G_v[s_])], 1)
            np.testing.assert_allclose(got, fd[a_], rtol=1e-6, atol=1e-6 * np.abs(fd).max())
        assert np.abs(fd).max() > 10.0


def dataclasses_replace_elements(model, **values):
    import dataclasses
    prm = dict(model.elements[NAME])
    prm.update({k: jnp.full_like(prm[k], v) for k, v in values.items()})
    return dataclasses.replace(model, elements={**model.elements, NAME: prm})


