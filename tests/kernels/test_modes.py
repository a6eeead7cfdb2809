"""Modal analysis (kernels/modes.py) against an independent eigen solve:
scipy's nonsymmetric eigen solver on the state matrix assembled here from a
dense forward-mode Jacobian of q (not the project's block linearisation)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

import kernels  # noqa: F401  (float64)
from kernels import dynamics, kc, modes
from kernels.rotations import euler_to_matrix

pytestmark = pytest.mark.slow


def _dense_state_matrix(model, r, u):
    """A = d/d(r, v) of (dr/dt, dv/dt) at rest, by jacfwd of eq. (1) written out here."""
    m = model.topology.n_bodies

    def rhs(y):
        rr, vv = y[:6 * m].reshape(m, 6), y[6 * m:].reshape(m, 6)
        a = rr[:, 3:]
        # eq. (1a): translation rates = v, Euler-angle rates from the body angular velocity
        ay, ax = a[:, 1], a[:, 2]
        w = vv[:, 3:]
        # z-y'-x'': w = E(angles) d(angles) with E rows (-sy, 0, 1), (cy sx, cx, 0), (cy cx, -sx, 0)
        E = jnp.stack([jnp.stack([-jnp.sin(ay), jnp.zeros_like(ay), jnp.ones_like(ay)], -1),
                       jnp.stack([jnp.cos(ay) * jnp.sin(ax), jnp.cos(ax), jnp.zeros_like(ay)], -1),
                       jnp.stack([jnp.cos(ay) * jnp.cos(ax), -jnp.sin(ax), jnp.zeros_like(ay)], -1)], -2)
        da = jnp.linalg.solve(E, w[..., None])[..., 0]
        rdot = jnp.concatenate([vv[:, :3], da], axis=1)
        return jnp.concatenate([rdot.reshape(-1), dynamics.q_fn(model, rr, vv, u).reshape(-1)])
    y0 = jnp.concatenate([r.reshape(-1), jnp.zeros(6 * m)])
    return np.asarray(jax.jacfwd(rhs)(y0))


@pytest.fixture(scope="module")
def dw_modes(dw_model):
    eq = jax.jit(kc.design_position)(dw_model)
    u = kc.design_loads(eq)
    md = jax.jit(lambda m, r, uu: modes.modes(m, r, uu, 24))(dw_model, eq.r, u)
    return dw_model, eq, u, md


def test_modes_equal_an_independent_eigen_solve(dw_modes):
    model, eq, u, md = dw_modes
    lam = scipy.linalg.eigvals(_dense_state_matrix(model, eq.r, u))
    osc = lam[lam.imag > 1e-9 * np.maximum(np.abs(lam), 1.0)]
    ref = osc[np.argsort(np.abs(osc))][:24]
    f_ref = np.abs(ref) / (2 * np.pi)
    z_ref = -ref.real / np.abs(ref)
    np.testing.assert_allclose(np.asarray(md.frequency), f_ref, rtol=1e-7)
    np.testing.assert_allclose(np.asarray(md.damping_ratio), z_ref, rtol=1e-6, atol=1e-9)
    assert int(md.n_overdamped) == int(np.sum(np.abs(lam.imag) <= 1e-9 * np.maximum(np.abs(lam), 1.0)))
    assert np.all(lam.real < 1e-6 * np.abs(lam).max())          # stable at the design position


def test_mode_participation(dw_modes):
    model, eq, u, md = dw_modes
    be, bu = np.asarray(md.body_energy), np.asarray(md.bushing_energy)
    np.testing.assert_allclose(be.sum(1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(bu.sum(1), 1.0, rtol=1e-12)
    assert np.all(be >= 0) and np.all(bu >= 0)
    names = model.topology.body_names
    # the lowest mode is wheel spin on the bearing drag rate: all kinetic energy in the wheels,
    # all elastic energy in the bearing rows (their spin rate), frequency sqrt(k / J) / 2 pi
    spin = [names.index("wheel_left"), names.index("wheel_right")]
    assert be[0, spin].sum() > 0.99
    bnames = model.topology.bushing_names
    rows = [i for i, n in enumerate(bnames) if n.startswith("wheel_bearing")]
    assert bu[0, rows].sum() > 0.99
    k_spin = sum(float(model.elements["bushing"]["k"][i, 5]) for i in rows) / 2        # per wheel
    assert float(md.frequency[0]) == pytest.approx(np.sqrt(k_spin / 0.9) / (2 * np.pi), rel=0.02)


def _mirror_matrix(body_names):
    """The mirror map of the state (r, v), built here from the body names:
    left <-> right bodies, (x, y, z, psi, theta, phi) -> (x, -y, z, -psi,
    theta, -phi), the same signs for (v, omega)."""
    names = list(body_names)
    m = len(names)
    P = np.zeros((6 * m, 6 * m))
    signs = np.diag([1.0, -1.0, 1.0, -1.0, 1.0, -1.0])
    for i, b in enumerate(names):
        j = names.index(b.replace("_left", "_right") if b.endswith("_left") else b.replace("_right", "_left"))
        P[6 * j:6 * j + 6, 6 * i:6 * i + 6] = signs
    return np.kron(np.eye(2), P)


def test_mirror_split_labels_parallel_and_opposite_modes(dw_modes):
    """The nominal double wishbone is mirror-symmetric: the split solve is
    taken and each mode's +1 / -1 label equals P x = +-x for scipy's
    eigenvector of that eigenvalue (modes whose eigenvalue is not repeated),
    and the bodies' kinetic-energy shares (from the split solve's inverse
    iteration) equal those of scipy's eigenvector (well-separated modes)."""
    model, eq, u, md = dw_modes
    assert bool(md.mirror) and float(md.asymmetry) < modes.MIRROR_TOLERANCE
    A = _dense_state_matrix(model, eq.r, u)
    P = _mirror_matrix(model.topology.body_names)
    assert np.abs(P @ A @ P - A).max() < 1e-9 * np.abs(A).max()
    lam, X = scipy.linalg.eig(A)
    sym = np.asarray(md.symmetry)
    np.testing.assert_allclose(np.abs(sym), 1.0, atol=1e-9)
    checked = energies = 0
    n = A.shape[0] // 2
    for k, ev in enumerate(np.asarray(md.eigenvalue)):
        d = np.abs(lam - ev)
        i = int(np.argmin(d))
        if np.sort(d)[1] < 1e-6 * abs(ev):      # repeated: the eigenvector is any mix of the pair
            continue
        x = X[:, i] / np.linalg.norm(X[:, i])
        label = np.real(np.vdot(x, P @ x))      # +1: P x = x, -1: P x = -x
        assert label == pytest.approx(sym[k], abs=1e-6)
        if np.sort(d)[1] > 1e-4 * abs(ev):      # well separated: the vector is well conditioned
            # kinetic-energy shares of the bodies from scipy's eigenvector
            xv = x[n:].reshape(-1, 6)
            T = (np.asarray(model.mass) * np.sum(np.abs(xv[:, :3]) ** 2, axis=1)
                 + np.real(np.einsum("bi,bij,bj->b", np.conj(xv[:, 3:]), np.asarray(model.inertia), xv[:, 3:])))
            np.testing.assert_allclose(np.asarray(md.body_energy[k]), T / T.sum(), atol=1e-6)
            energies += 1
        checked += 1
    assert checked >= 10 and energies >= 3 and {1.0, -1.0} <= set(np.round(sym[:10]))


def test_asymmetric_axle_takes_the_full_eigen_solve(dw_model):
    """One left bushing 1 % stiffer: the split is refused (measured
    asymmetry), the full solve still equals scipy's, some modes are mixed."""
    names = list(dw_model.topology.bushing_names)
    b = names.index("lower_link_body_left")
    model = dw_model.replace_elements(bushing={"k_scale": dw_model.elements["bushing"]["k_scale"].at[b].multiply(1.01)})
    eq = jax.jit(kc.design_position)(model)
    u = kc.design_loads(eq)
    md = jax.jit(lambda m, r, uu: modes.modes(m, r, uu, 24))(model, eq.r, u)
    assert not bool(md.mirror) and float(md.asymmetry) > 1e3 * modes.MIRROR_TOLERANCE
    lam = scipy.linalg.eigvals(_dense_state_matrix(model, eq.r, u))
    osc = lam[lam.imag > 1e-9 * np.maximum(np.abs(lam), 1.0)]
    ref = osc[np.argsort(np.abs(osc))][:24]
    np.testing.assert_allclose(np.asarray(md.frequency), np.abs(ref) / (2 * np.pi), rtol=1e-7)
    sym = np.asarray(md.symmetry)
    assert np.all(np.abs(sym) <= 1 + 1e-12) and np.min(np.abs(sym)) < 0.99
