"""An added element group in the double wishbone's step (full form, on demand): zero stiffness reproduces the axle, a torsion spring equals the rotational bushing, its equilibrium torque. CI's forms: the group's element Jacobian against central differences on the axle (tests/kernels/test_element_registry_axle.py) and the registry's unit tests (tests/kernels/test_element_registry.py)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.spatial.transform import Rotation
import kernels  # noqa: F401  (float64)
from kernels import dynamics, integrate, loads, metrics
from kernels.methods import METHODS
from kernels.model import build_model
from kernels.system import model_system
from sweep.axle.builder import build_tables
from tests.kernels.test_element_registry import CHANNELS, C_TORSION, K_TORSION, NAME, TABLE, TORSION, dw_cfg, equilibrium, slots, tor_model, tor_tables, torsion_build, torsion_element, torsion_group, torsion_validate  # noqa: F401

pytestmark = pytest.mark.validation


@pytest.fixture(scope="module")
def step_runs(torsion_group, tor_model, dw_model, step_excitation):
    """Equilibria and 20 LSRT2 steps (h = 1 ms) from 4.99 s over the load
    step at 5 s: plain axle, torsion k = c = 0, torsion (k, c), and the same
    law as a rotational-only bushing. The dense solver: the group's blocks
    enter the assembled Jacobian as any element's (its block linearisation
    is checked above); the block solver cost this fixture a minute more of
    compilation."""
    u = loads.u_at(step_excitation, 4.9)
    # one topology for the three variants (torsion spring and rotational
    # bushing side by side, the unused one at zero rates): the equilibrium
    # and the 20 steps compile once for them, once more for the plain axle
    zero = build_model(build_tables(dw_cfg(0.0, 0.0, both=(0.0, 0.0)), groups=(TORSION,)))
    tor = build_model(build_tables(dw_cfg(both=(0.0, 0.0)), groups=(TORSION,)))
    bush = build_model(build_tables(dw_cfg(0.0, 0.0, both=(K_TORSION, C_TORSION)), groups=(TORSION,)))
    assert zero.topology == tor.topology == bush.topology
    out = {}
    for key, model in (("base", dw_model), ("zero", zero), ("torsion", tor), ("bushing", bush)):
        eq = equilibrium(model, u)
        assert bool(eq.converged), key
        traj = lsrt2_steps(model, step_excitation, eq.r)
        out[key] = (model, eq, {k: np.asarray(a) for k, a in traj.items()})
    return out


@jax.jit
def lsrt2_steps(model, exc, r_eq):
    """20 LSRT2 steps (h = 1 ms, dense solver, relinearised every step) from
    rest at r_eq from t = 4.99 s; channels: wheel-centre displacement [m],
    toe and camber [rad], bushing forces [N, N m] (kernels.metrics)."""
    m = model.topology.n_bodies

    def out(r, v, t):
        r, v = r.reshape(m, 6), v.reshape(m, 6)
        toe, camber = metrics.toe_camber(model, r)
        return {"wheel_centre_displacement": metrics.wheel_centre_position(model, r)
                - metrics.wheel_centre_position(model, r_eq),
                "toe": toe, "camber": camber, "bushing_force": metrics.bushing_forces(model, r, v)}
    n = r_eq.size
    return integrate.simulate(METHODS["lsrt2"], model_system(model, exc, "dense"), r_eq.reshape(-1),
                              jnp.zeros(n, r_eq.dtype), 4.99, 1e-3, 20, 1, 1, out).outputs


def test_zero_stiffness_reproduces_the_axle(step_runs):
    (m0, eq0, base), (mz, eqz, zero) = step_runs["base"], step_runs["zero"]
    np.testing.assert_allclose(np.asarray(eqz.r), np.asarray(eq0.r), rtol=0, atol=1e-12)
    # the zero model's bushings: the axle's, plus the zero-rate twist bushings
    names = mz.topology.bushing_names
    zero = dict(zero, bushing_force=zero["bushing_force"][:, [names.index(n) for n in m0.topology.bushing_names]])
    for ch in CHANNELS + ("bushing_force",):
        scale = np.abs(base[ch]).max()
        np.testing.assert_allclose(zero[ch], base[ch], rtol=0, atol=1e-10 * scale, err_msg=ch)
    # the load step moves the wheel: the comparison is not of constants
    assert np.ptp(base["wheel_centre_displacement"][:, 0, 0]) > 1e-5


def test_torsion_spring_equals_the_rotational_bushing(step_runs):
    """Independent implementation of the same law (built-in bushing group,
    closed-form Jacobian) gives the same equilibrium and trajectory."""
    (_, eqt, tor), (_, eqb, bus), (_, eq0, _) = step_runs["torsion"], step_runs["bushing"], step_runs["base"]
    np.testing.assert_allclose(np.asarray(eqt.r), np.asarray(eqb.r), rtol=0, atol=1e-10)
    for ch in CHANNELS:
        scale = np.abs(bus[ch]).max()
        np.testing.assert_allclose(tor[ch], bus[ch], rtol=0, atol=1e-8 * scale, err_msg=ch)
    # and the spring matters: it moves the equilibrium by far more than that
    assert np.abs(np.asarray(eqt.r) - np.asarray(eq0.r)).max() > 1e-6


def test_equilibrium_torque_is_k_times_the_relative_angle(step_runs):
    """At the equilibrium with the spring, the element's torque on the lower
    link (vehicle frame) is -k phi, phi = rotation vector of D_j D_i^T, D_a =
    the rotation of body a from its design pose (scipy, from the body
    angles; the two marker frames coincide at the design pose): magnitude k
    times the relative angle. And the spring reduces that angle compared
    with the axle without it."""
    model, eqt, _ = step_runs["torsion"]
    _, eq0, _ = step_runs["base"]
    i, j = slots(model, "upper_arm_left", "lower_link_left")
    R = lambda e: Rotation.from_euler("ZYX", np.asarray(e)).as_matrix()  # noqa: E731  z-y'-x''
    rd = np.asarray(model.r_design)

    def phi(r):
        r = np.asarray(r)
        Di, Dj = R(r[i, 3:]) @ R(rd[i, 3:]).T, R(r[j, 3:]) @ R(rd[j, 3:]).T
        return Rotation.from_matrix(Dj @ Di.T).as_rotvec()
    ph = phi(eqt.r)
    assert np.linalg.norm(ph) > 1e-4
    x = dynamics.states_with_ground(eqt.r, jnp.zeros_like(eqt.r))
    prm = jax.tree_util.tree_map(lambda a: a[0], model.elements[NAME])
    g1, g2 = torsion_element(prm, x[i], x[j])
    assert np.all(np.asarray(g1[:3]) == 0) and np.all(np.asarray(g2[:3]) == 0)
    M2 = R(np.asarray(eqt.r)[j, 3:]) @ np.asarray(g2[3:])            # on the lower link, vehicle frame
    M1 = R(np.asarray(eqt.r)[i, 3:]) @ np.asarray(g1[3:])
    np.testing.assert_allclose(M2, -K_TORSION * ph, rtol=1e-9, atol=1e-9 * K_TORSION * np.abs(ph).max())
    np.testing.assert_allclose(M1, -M2, rtol=1e-12, atol=1e-12 * np.abs(M2).max())
    np.testing.assert_allclose(np.linalg.norm(M2), K_TORSION * np.linalg.norm(ph), rtol=1e-9)
    assert np.linalg.norm(ph) < np.linalg.norm(phi(eq0.r))
