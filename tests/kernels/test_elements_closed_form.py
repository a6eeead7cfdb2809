"""The closed-form element Jacobians against autodiff (with curves, on the axle) and the bushing in float32."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import kernels  # noqa: F401
from kernels import forces
from kernels.model import build_model
from kernels.rotations import euler_to_matrix
from tests.kernels.test_elements import BUSHING_LARGE, C6, K6, bu_prm, states, two_body_tables  # noqa: F401

pytestmark = pytest.mark.slow


def _closed_vs_autodiff(prm, x1, x2, kind="bushing"):
    fn, jac = {"bushing": (forces.bushing_element, forces.bushing_element_jacobian),
               "p2p": (forces.p2p_element, forces.p2p_element_jacobian)}[kind]
    (g1, g2), (d1, d2) = jax.jit(jax.vmap(jac))(prm, x1, x2)
    G1, G2 = jax.vmap(fn)(prm, x1, x2)
    J = jax.jit(jax.vmap(lambda p, a, b: jax.jacfwd(lambda a, b: fn(p, a, b), argnums=(0, 1))(a, b)))(prm, x1, x2)
    for mine, ref in ((g1, G1), (g2, G2), (d1[0], J[0][0]), (d1[1], J[1][0]), (d2[0], J[0][1]), (d2[1], J[1][1])):
        scale = jnp.abs(ref).max(axis=tuple(range(1, ref.ndim)), keepdims=True)
        assert float(scale.max()) > 0
        # per element (an unengaged stop has exactly zero force and Jacobian)
        scale = jnp.maximum(scale, 1e-12 * scale.max())
        np.testing.assert_allclose(mine, ref, rtol=0, atol=1e-10 * float(scale.max()))
        assert float((jnp.abs(mine - ref) / scale).max()) < 1e-10


def test_closed_form_bushing_jacobian_matches_autodiff_with_curves():
    """The closed-form element Jacobian (kernels.forces.bushing_element_jacobian)
    equals forward-mode autodiff of the bushing forces (itself checked against
    central differences above): tabulated stiffness and damping curves,
    offset, preload, rotated markers, large relative rotation, moving bodies."""
    curves_ = {"x": {"x": [-0.01, 0, 0.01, 0.02], "y": [-2000, 0, 1500, 5000]},
               "ry": {"x": [-0.5, 0, 0.5], "y": [-80, 0, 60]}}
    bushing = {"stiffness": K6, "damping": C6, "stiffness_curves": curves_,
               "damping_curves": {"rz": {"x": [-1, 0, 1], "y": [-5, 0, 2]}},
               "preload": [10, -20, 30, 1, -2, 3], "offset": [1e-3, 0, -2e-3, 0.01, 0, 0.02]}
    model = build_model(two_body_tables(bushing))
    prm = model.elements["bushing"]
    rng = np.random.default_rng(7)
    xs1, xs2 = [], []
    for _ in range(6):
        x1, x2 = states(model, dx=rng.normal(0, [3e-3] * 3 + [0.3] * 3), v2=rng.normal(0, [0.2] * 3 + [1.0] * 3))
        xs1.append(x1.at[6:].set(jnp.asarray(rng.normal(0, 0.5, 6))))
        xs2.append(x2)
    rep = lambda a: jnp.repeat(a, 6, axis=0)  # noqa: E731
    _closed_vs_autodiff(jax.tree_util.tree_map(rep, prm), jnp.stack(xs1), jnp.stack(xs2))


@pytest.mark.parametrize("kind", ["bushing", "p2p"])
def test_closed_form_jacobians_match_autodiff_on_the_axle(dw_model, kind):
    """All 47 bushings / 8 P2P elements of the double wishbone at a perturbed,
    moving state (ground-attached bushings included: the ground's state is zero)."""
    from kernels.dynamics import states_with_ground
    from tests.conftest import random_state
    r, v = random_state(dw_model, seed=4)
    x = states_with_ground(r, v)
    b = getattr(dw_model.topology, f"{kind}_bodies")
    _closed_vs_autodiff(dw_model.elements[kind], x[b[:, 0]], x[b[:, 1]], kind)


def test_closed_form_p2p_jacobian_matches_autodiff_with_curves():
    """Tabulated damper (compression and rebound scaled differently), progressive
    spring and engaged bump stop, at moving states."""
    curve = {"x": [-1, 0, 0.5, 1], "y": [-900, 0, 300, 500]}
    kinds = [{"kind": "damper", "curve": curve},
             {"kind": "spring", "stiffness": 2e4, "preload": 300.0,
              "curve": {"x": [0, 0.01, 0.02], "y": [0, 100, 600]}},
             {"kind": "bump_stop", "clearance": 0.0, "curve": {"x": [0, 0.002, 0.01, 0.02], "y": [0, 200, 1000, 2500]}}]
    rng = np.random.default_rng(2)
    for p2p in kinds:
        model = build_model(two_body_tables(p2p=p2p))
        prm = model.elements["p2p"]
        if p2p["kind"] == "damper":
            prm = dict(prm, c_scale=jnp.array([[0.8, 1.3]]))
        xs1, xs2 = [], []
        for _ in range(4):
            x1, x2 = states(model, dx=rng.normal(0, [3e-3] * 3 + [0.1] * 3), v2=rng.normal(0, [0.2] * 3 + [1.0] * 3))
            xs1.append(x1)
            xs2.append(x2)
        rep = lambda a: jnp.repeat(a, 4, axis=0)  # noqa: E731
        _closed_vs_autodiff(jax.tree_util.tree_map(rep, prm), jnp.stack(xs1), jnp.stack(xs2), "p2p")


def test_bushing_float32_follows_input_dtype():
    model = build_model(two_body_tables(BUSHING_LARGE))
    prm = bu_prm(model)
    x1, x2 = states(model, dx=np.array([1e-3, -2e-3, 3e-3, 0.05, -0.02, 0.03]), v2=np.array([0.1, 0, 0, 0.5, 0, 0]))
    g64 = jnp.concatenate(forces.bushing_element(prm, x1, x2))
    p32 = jax.tree_util.tree_map(lambda a: a.astype(jnp.float32), prm)
    g32 = jnp.concatenate(forces.bushing_element(p32, x1.astype(jnp.float32), x2.astype(jnp.float32)))
    assert g32.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(g32), np.asarray(g64), atol=1e-4 * float(jnp.abs(g64).max()))
    (h1, h2), _ = forces.bushing_element_jacobian(p32, x1.astype(jnp.float32), x2.astype(jnp.float32))
    assert h1.dtype == jnp.float32
