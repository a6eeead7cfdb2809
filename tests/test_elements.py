"""Force elements against analytic forces and finite differences."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import kernels  # noqa: F401
from kernels import forces
from kernels.model import build_model
from kernels.rotations import euler_to_matrix


def two_body_tables(bushing=None, p2p=None):
    """Body 1 at the origin bushed to body 2 at (0.5, 0, 0); markers at (0.2, 0.1, 0)."""
    I = np.diag([0.2, 0.3, 0.4]).tolist()
    R = np.array([[0, 0, 1], [1, 0, 0], [0, 1, 0.0]])  # marker axes: x->y, y->z, z->x
    tables = {
        "name": "toy", "gravity": [0, 0, 0],
        "bodies": [{"index": 1, "name": "a", "mass": 2.0, "inertia": I, "position": [0, 0, 0]},
                   {"index": 2, "name": "b", "mass": 3.0, "inertia": I, "position": [0.5, 0, 0],
                    "euler": [0.1, -0.2, 0.3]}],
        "markers": [{"index": 1, "name": "m1", "body": 1, "position": [0.2, 0.1, 0], "orientation": R.tolist()},
                    {"index": 2, "name": "m2", "body": 2, "position": [0.2, 0.1, 0], "orientation": R.tolist()},
                    {"index": 3, "name": "m3", "body": 2, "position": [0.6, 0.3, -0.1]}],
        "bushings": [], "p2p": [],
        "wheels": {"left": 1, "right": 2},
    }
    if bushing:
        tables["bushings"] = [{"index": 1, "name": "bu", "marker_1": 1, "marker_2": 2, **bushing}]
    if p2p:
        tables["p2p"] = [{"index": 1, "name": "pp", "marker_1": 1, "marker_2": 3, **p2p}]
    return tables


K6 = [1e5, 2e5, 3e5, 100.0, 200.0, 300.0]
C6 = [10.0, 20.0, 30.0, 1.0, 2.0, 3.0]


def states(model, dx=np.zeros(6), v2=np.zeros(6)):
    x1 = jnp.concatenate([model.r_design[0], jnp.zeros(6)])
    x2 = jnp.concatenate([model.r_design[1] + jnp.asarray(dx), jnp.asarray(v2)])
    return x1, x2


def bu_prm(model):
    return jax.tree_util.tree_map(lambda a: a[0], forces.bushing_params(model))


def test_bushing_linear_force_in_marker_frame():
    model = build_model(two_body_tables({"stiffness": K6, "damping": C6}))
    prm = bu_prm(model)
    # translate body 2 by 1 mm along the marker's local x (= vehicle y)
    x1, x2 = states(model, dx=np.array([0, 1e-3, 0, 0, 0, 0]))
    f = forces.bushing_output(prm, x1, x2)
    np.testing.assert_allclose(f[:3], [0, K6[0] * 1e-3, 0], atol=1e-9)
    np.testing.assert_allclose(f[3:], 0, atol=1e-9)
    # velocity along local z (= vehicle x): damping force on body 1 along +x
    x1, x2 = states(model, v2=np.array([0.1, 0, 0, 0, 0, 0]))
    np.testing.assert_allclose(forces.bushing_output(prm, x1, x2)[:3], [C6[2] * 0.1, 0, 0], atol=1e-9)


def test_bushing_small_rotation_torque():
    model = build_model(two_body_tables({"stiffness": K6, "damping": [0] * 6}))
    prm = bu_prm(model)
    # rotate body 2 about the vehicle x axis (= marker z) by 1e-4 rad about the marker point:
    # build the perturbed pose exactly from R_new = Rx(eps) R2
    eps = 1e-4
    R2 = euler_to_matrix(model.r_design[1, 3:])
    Rx = jnp.array([[1, 0, 0], [0, np.cos(eps), -np.sin(eps)], [0, np.sin(eps), np.cos(eps)]])
    from kernels.rotations import matrix_to_euler
    a_new = matrix_to_euler(Rx @ R2)
    pm = jnp.array([0.2, 0.1, 0.0])
    p_new = pm + Rx @ (model.r_design[1, :3] - pm)
    dx = jnp.concatenate([p_new - model.r_design[1, :3], a_new - model.r_design[1, 3:]])
    x1, x2 = states(model, dx=np.asarray(dx))
    f = forces.bushing_output(prm, x1, x2)
    np.testing.assert_allclose(f[3:], [K6[5] * eps, 0, 0], rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(f[:3], 0, atol=1e-6)


@pytest.mark.parametrize("kind", ["bushing", "p2p"])
def test_element_forces_balance_linear_and_angular_momentum(kind):
    bushing = {"stiffness": K6, "damping": C6, "preload": [5, 0, 0, 0, 1, 0]} if kind == "bushing" else None
    p2p = {"kind": "spring", "stiffness": 2e4, "preload": 300.0} if kind == "p2p" else None
    model = build_model(two_body_tables(bushing, p2p))
    fn = forces.bushing_element if kind == "bushing" else forces.p2p_element
    prm = jax.tree_util.tree_map(lambda a: a[0], (forces.bushing_params if kind == "bushing" else forces.p2p_params)(model))
    x1, x2 = states(model, dx=np.array([1e-3, -2e-3, 3e-3, 0.01, -0.02, 0.015]), v2=np.array([0.1, 0.2, -0.1, 1, -2, 0.5]))
    g1, g2 = fn(prm, x1, x2)
    np.testing.assert_allclose(g1[:3] + g2[:3], 0, atol=1e-9)
    mom = 0
    for x, g in ((x1, g1), (x2, g2)):
        R = euler_to_matrix(x[3:6])
        mom = mom + jnp.cross(x[:3], g[:3]) + R @ g[3:]
    np.testing.assert_allclose(mom, 0, atol=1e-8 * float(jnp.abs(g1).max()))


def test_p2p_laws():
    base = two_body_tables()
    L0 = float(np.linalg.norm(np.subtract([0.6, 0.3, -0.1], [0.2, 0.1, 0.0])))
    e = np.subtract([0.6, 0.3, -0.1], [0.2, 0.1, 0.0]) / L0

    def tension(p2p, ds):  # ds: shortening of the element along its line [m]
        model = build_model(two_body_tables(p2p=p2p))
        prm = jax.tree_util.tree_map(lambda a: a[0], forces.p2p_params(model))
        x1, x2 = states(model, dx=np.concatenate([-ds * e, np.zeros(3)]))
        return float(forces.p2p_tension(prm, x1, x2)[0])

    assert base  # tables build
    np.testing.assert_allclose(tension({"kind": "spring", "stiffness": 2e4, "preload": 300.0}, 0.01),
                               -(300 + 200), rtol=1e-9)
    curve = {"x": [0, 0.002, 0.01, 0.02], "y": [0, 200, 1000, 2500]}
    bump = {"kind": "bump_stop", "clearance": 0.02, "curve": curve}
    assert tension(bump, 0.019) == 0.0
    np.testing.assert_allclose(tension(bump, 0.03), -1000, rtol=1e-9)  # 10 mm past clearance
    np.testing.assert_allclose(tension(bump, 0.04), -2500, rtol=1e-9)
    reb = {"kind": "rebound_stop", "clearance": 0.01, "curve": curve}
    assert tension(reb, -0.009) == 0.0 and tension(reb, 0.05) == 0.0
    np.testing.assert_allclose(tension(reb, -0.02), 1000, rtol=1e-9)


@pytest.mark.parametrize("kind", ["bushing", "p2p"])
def test_element_jacobian_matches_finite_differences(kind):
    """Element-local Jacobians (jacfwd) against central differences."""
    curves_ = {"x": {"x": [-0.01, 0, 0.01, 0.02], "y": [-2000, 0, 1500, 5000]}}
    bushing = {"stiffness": K6, "damping": C6, "stiffness_curves": curves_,
               "damping_curves": {"rz": {"x": [-1, 0, 1], "y": [-5, 0, 2]}}} if kind == "bushing" else None
    p2p = {"kind": "damper", "curve": {"x": [-1, 0, 0.5, 1], "y": [-900, 0, 300, 500]}} if kind == "p2p" else None
    model = build_model(two_body_tables(bushing, p2p))
    fn = forces.bushing_element if kind == "bushing" else forces.p2p_element
    prm = jax.tree_util.tree_map(lambda a: a[0], (forces.bushing_params if kind == "bushing" else forces.p2p_params)(model))
    x1, x2 = states(model, dx=np.array([2e-3, -1e-3, 4e-3, 0.02, 0.01, -0.03]), v2=np.array([0.1, -0.2, 0.3, 0.5, -1, 0.7]))
    J = jax.jacfwd(lambda a, b: jnp.concatenate(fn(prm, a, b)), argnums=(0, 1))(x1, x2)
    for arg, Jarg in ((0, J[0]), (1, J[1])):
        for k in range(12):
            h = 1e-6 if k < 6 else 1e-5
            dx = jnp.zeros(12).at[k].set(h)
            xs = [x1, x2]
            plus = list(xs); plus[arg] = xs[arg] + dx
            minus = list(xs); minus[arg] = xs[arg] - dx
            fd = (jnp.concatenate(fn(prm, *plus)) - jnp.concatenate(fn(prm, *minus))) / (2 * h)
            scale = float(jnp.abs(Jarg).max())
            np.testing.assert_allclose(Jarg[:, k], fd, atol=2e-6 * scale)


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
    prm = forces.bushing_params(model)
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
    from kernels.dynamics import _states_with_ground
    from tests.conftest import random_state
    r, v = random_state(dw_model, seed=4)
    x = _states_with_ground(r, v)
    b = getattr(dw_model.topology, f"{kind}_bodies")
    params = forces.bushing_params if kind == "bushing" else forces.p2p_params
    _closed_vs_autodiff(params(dw_model), x[b[:, 0]], x[b[:, 1]], kind)


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
        prm = forces.p2p_params(model)
        if p2p["kind"] == "damper":
            prm = dict(prm, c_scale=jnp.array([[0.8, 1.3]]))
        xs1, xs2 = [], []
        for _ in range(4):
            x1, x2 = states(model, dx=rng.normal(0, [3e-3] * 3 + [0.1] * 3), v2=rng.normal(0, [0.2] * 3 + [1.0] * 3))
            xs1.append(x1)
            xs2.append(x2)
        rep = lambda a: jnp.repeat(a, 4, axis=0)  # noqa: E731
        _closed_vs_autodiff(jax.tree_util.tree_map(rep, prm), jnp.stack(xs1), jnp.stack(xs2), "p2p")
