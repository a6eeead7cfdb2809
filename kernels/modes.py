"""Modal analysis of the axle linearised at a static state (method.md eqs. 1, 4-5).

At rest (v = 0) the linearisation of eq. (1) in the state (r, v) is

    d/dt (dr, dv) = A (dr, dv),   A = [[0, K(r)], [J_r, J_v]]

(``K v`` has no r-derivative at v = 0). Its eigenvalues lambda come as
complex-conjugate pairs for the oscillatory modes and as real values for the
overdamped ones. Per oscillatory mode (Im lambda > 0) this module gives

- the undamped natural frequency f = |lambda| / (2 pi) [Hz] and the damping
  ratio zeta = -Re(lambda) / |lambda| [-] (the usual definitions for a
  mode with characteristic polynomial s^2 + 2 zeta w s + w^2),
- participation: the share of each body in the mode's kinetic energy
  (0.5 m |dv_t|^2 + 0.5 dw^H I dw, from the velocity part of the
  eigenvector) and the share of each bushing in its elastic energy
  (0.5 sum_j k_j |d deflection_j|^2 with the tangent rates of the
  characteristics at the state, from the coordinate part).

Everything is pure JAX (``jnp.linalg.eig``: nonsymmetric eigenproblem; XLA
implements it on CPU - on GPU the sweep job runs this stage on the host
CPU, see sweep/kinds/modal_analysis.py) and vmaps over variants; the mode count per
variant is fixed (``n_modes`` lowest by frequency, NaN where a variant has
fewer oscillatory modes).

Mirror symmetry (exact, not an approximation). An axle whose right side is
the mirror image of its left side in the vehicle's x-z plane (bodies named
``*_left`` / ``*_right``, a body without a side suffix mapped onto itself)
has a state matrix that commutes with the mirror map P: body i <-> its
partner, coordinates (x, y, z, psi, theta, phi) -> (x, -y, z, -psi, theta,
-phi) for positions and z-y'-x'' Euler angles alike (S Rz(psi) Ry(theta)
Rx(phi) S = Rz(-psi) Ry(theta) Rx(-phi), S = diag(1, -1, 1)), and
(vx, -vy, vz, -wx, wy, -wz) for the velocities (angular velocity is a
pseudo-vector). Then A is block diagonal in the orthonormal basis of P's
+1 space (parallel wheel travel: both sides move as mirror images) and -1
space (opposite wheel travel), each of half the size: two eigenproblems of
n states instead of one of 2n, ~4x fewer flops, and every mode comes out
as a pure in-phase or opposite mode (``symmetry`` +1 / -1). Whether a
variant is symmetric is measured, not assumed: the largest entry of the
coupling blocks between the two spaces relative to the largest entry of
A (:data:`MIRROR_TOLERANCE`); a variant above it (per-side parameters, a
one-sided load) takes the full 2n eigen solve (``lax.cond``: only the
taken branch runs when the call is not vmapped - the sweep job maps
variants one by one for this stage).
"""
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from kernels import forces, linalg
from kernels.dynamics import dense_kinematic_matrix, states_with_ground, linearise


class Modes(NamedTuple):
    frequency: jax.Array          # (n_modes,) Hz, undamped natural frequency |lambda| / 2 pi
    damping_ratio: jax.Array      # (n_modes,) -, -Re(lambda) / |lambda|
    eigenvalue: jax.Array         # (n_modes,) complex, 1/s
    body_energy: jax.Array        # (n_modes, m) kinetic-energy share per body, rows sum to 1
    bushing_energy: jax.Array     # (n_modes, nb) elastic-energy share per bushing, rows sum to 1
    n_overdamped: jax.Array       # () number of real eigenvalues (overdamped / static modes)
    symmetry: jax.Array           # (n_modes,) +1 parallel (mirror-symmetric), -1 opposite, between: mixed
    mirror: jax.Array             # () bool, the mirror-split eigen solve was taken
    asymmetry: jax.Array          # () largest coupling entry between the mirror spaces / largest |A|


#: Relative coupling between the mirror spaces below which a variant's
#: eigenproblem is split (:func:`lowest_modes`). Round-off of the assembly
#: of a symmetric axle gives ~1e-11 (double wishbone, multi-link), a
#: per-side stiffness change of 1 % ~1e-4.
MIRROR_TOLERANCE = 1e-9

_MIRROR_SIGNS = np.array([1.0, -1.0, 1.0, -1.0, 1.0, -1.0])   # (x, y, z, psi, theta, phi) and (v, w)


def mirror_partner(body_names):
    """Index of each body's mirror image (numpy int array): ``<name>_left``
    <-> ``<name>_right``, a body without a side suffix onto itself; None when
    a side body has no partner (no mirror split possible)."""
    names = list(body_names)
    partner = []
    for b in names:
        for own, other in (("_left", "_right"), ("_right", "_left")):
            if b.endswith(own):
                twin = b[:-len(own)] + other
                if twin not in names:
                    return None
                partner.append(names.index(twin))
                break
        else:
            partner.append(names.index(b))
    return np.array(partner)


def mirror_basis(body_names):
    """Orthonormal bases of the mirror map's +1 and -1 spaces in the state
    (r, v) of 2n = 12 m coordinates, as numpy (2n, n) matrices (T_plus,
    T_minus), or None where the bodies do not pair (:func:`mirror_partner`)."""
    partner = mirror_partner(body_names)
    if partner is None:
        return None
    m = len(partner)
    n = 6 * m
    P = np.zeros((n, n))
    for i, j in enumerate(partner):
        P[6 * j:6 * j + 6, 6 * i:6 * i + 6] = np.diag(_MIRROR_SIGNS)
    cols = {1.0: [], -1.0: []}
    seen = set()
    for k in range(n):
        if k in seen:
            continue
        j = int(np.nonzero(P[:, k])[0][0])
        s = P[j, k]
        seen.update((k, j))
        if j == k:                      # a coordinate mapped onto itself (+-)
            e = np.zeros(n)
            e[k] = 1.0
            cols[s].append(e)
            continue
        for sign in (1.0, -1.0):        # e_k +- P e_k
            e = np.zeros(n)
            e[k] = 1.0
            e[j] = sign * s
            cols[sign].append(e / np.sqrt(2.0))
    Tp, Tm = np.array(cols[1.0]).T, np.array(cols[-1.0]).T
    if Tp.shape[1] != Tm.shape[1]:
        return None
    z = np.zeros_like(Tp)
    return np.block([[Tp, z], [z, Tp]]), np.block([[Tm, z], [z, Tm]])


def state_matrix(model, r, u):
    """A = [[0, K], [J_r, J_v]] (2n, 2n) of eq. (1) linearised at rest at r (m, 6) under u (2, 6)."""
    lin = linearise(model, r, jnp.zeros_like(r), u)
    n = lin.J_r.shape[0]
    Kd = dense_kinematic_matrix(lin)
    top = jnp.concatenate([jnp.zeros((n, n), r.dtype), Kd], axis=1)
    bottom = jnp.concatenate([lin.J_r, lin.J_v], axis=1)
    return jnp.concatenate([top, bottom], axis=0)


def _bushing_deflection_map(model, r):
    """Linear map dr (m, 6) -> bushing deflection increments (nb, 6) and the
    tangent elastic rates (nb, 6) of the characteristics at r."""
    topo = model.topology
    prm = model.elements["bushing"]
    bodies = topo.bushing_bodies
    v0 = jnp.zeros_like(r)

    def defl(rr):
        x = states_with_ground(rr, v0)
        return jax.vmap(lambda p, a, b: forces.bushing_deflection(p, a, b)[0])(
            prm, x[bodies[:, 0]], x[bodies[:, 1]])
    d0 = defl(r)

    def rates(p, d):
        zero = jnp.zeros_like(d)
        return jax.jvp(lambda dd: forces.bushing_local_forces(p, dd, zero)[0], (d,), (jnp.ones_like(d),))[1]
    kd = jax.vmap(rates)(prm, d0)
    return (lambda dr: jax.jvp(defl, (r,), (dr,))[1]), kd


def _two_term(T):
    """Columns of a (2n, k) basis with at most two nonzeros each as index
    and weight arrays (ia, wa, ib, wb): x @ T = x[..., ia] wa + x[..., ib] wb."""
    ia, wa, ib, wb = [], [], [], []
    for c in range(T.shape[1]):
        nz = np.nonzero(T[:, c])[0]
        ia.append(nz[0])
        wa.append(T[nz[0], c])
        ib.append(nz[-1])
        wb.append(T[nz[-1], c] if len(nz) > 1 else 0.0)
    return np.array(ia), np.array(wa), np.array(ib), np.array(wb)


def _project(A, left, right):
    """left^T A right for two-term bases (:func:`_two_term`), by gathers;
    ``right`` None: left^T A."""
    if right is not None:
        ia, wa, ib, wb = right
        A = A[:, ia] * wa + A[:, ib] * wb
    ja, va, jb, vb = left
    return A[ja] * va[:, None] + A[jb] * vb[:, None]


def _expand(y, basis, N):
    """T y (N, k) for a two-term basis T (:func:`_two_term`) and y (h, k)."""
    ia, wa, ib, wb = basis
    x = jnp.zeros((N,) + y.shape[1:], y.dtype)
    return x.at[ia].add(wa[:, None] * y).at[ib].add(wb[:, None] * y)


def _select(lam, n_modes):
    """Indices of the ``n_modes`` lowest oscillatory eigenvalues (Im > 0) by
    |lambda| and whether each exists."""
    osc = jnp.imag(lam) > 1e-9 * jnp.maximum(jnp.abs(lam), 1.0)
    key = jnp.where(osc, jnp.abs(lam), jnp.inf)
    order = jnp.argsort(key)[:n_modes]
    return order, jnp.isfinite(key[order])


def _half_vectors(Ap, Am, plus, lam):
    """Eigenvectors (h, k) of the half state matrices for the eigenvalues
    lam (k,) (of Ap where ``plus``, else of Am), by inverse iteration on the
    second-order form: a half matrix is [[0, K], [J_r, J_v]] (the mirror
    basis acts alike on r and v), so (x_r, x_v) with
    (J_r K + lambda J_v - lambda^2 I) x_v = 0 and x_r = K x_v / lambda.
    Two solves with the exact eigenvalue's (numerically singular) matrix
    give x_v to round-off; one complex (h/2)-square solve per mode instead
    of the eigenvectors of the whole half (LAPACK's dgeev computes all of
    them: eigenvalues only cost about half)."""
    g = Ap.shape[0] // 2
    ctype = lam.dtype
    b = jnp.asarray(np.random.default_rng(7).normal(size=g), ctype)   # fixed start vector

    def parts(H):
        return (H[g:, :g] @ H[:g, g:]).astype(ctype), H[g:, g:].astype(ctype), H[:g, g:].astype(ctype)
    JKp, Jvp, Kp = parts(Ap)
    JKm, Jvm, Km = parts(Am)

    def one(is_plus, l):
        JK, Jv, K = (jnp.where(is_plus, u, w) for u, w in ((JKp, JKm), (Jvp, Jvm), (Kp, Km)))
        Q = JK + l * Jv - l * l * jnp.eye(g, dtype=ctype)
        y = linalg.solve(Q, b)
        xv = linalg.solve(Q, y / jnp.linalg.norm(y))
        xv = xv / jnp.linalg.norm(xv)
        return jnp.concatenate([K @ xv / l, xv])
    return jax.lax.map(lambda a: one(*a), (plus, lam)).T


def lowest_modes(A, n_modes, basis=None, tolerance=MIRROR_TOLERANCE):
    """Eigenvalues (n_modes,) and eigenvectors (2n, n_modes) of the lowest
    oscillatory modes of the state matrix A, the number of real eigenvalues,
    each mode's mirror symmetry (+1 / -1 / mixed), whether the mirror split
    was taken and the measured asymmetry (module docstring). ``basis``:
    :func:`mirror_basis` of the model's bodies, or None for the full solve."""
    N = A.shape[0]

    def count_real(lam):
        return jnp.sum(jnp.abs(jnp.imag(lam)) <= 1e-9 * jnp.maximum(jnp.abs(lam), 1.0))

    def full():
        lam, X = jnp.linalg.eig(A)
        order, valid = _select(lam, n_modes)
        return lam[order], X[:, order], count_real(lam), valid

    if basis is None:
        lam, X, n_real, valid = full()
        return lam, X, n_real, valid, jnp.full(n_modes, jnp.nan, A.dtype), jnp.array(False), jnp.array(jnp.nan)
    tp, tm = (_two_term(np.asarray(b)) for b in basis)
    scale = jnp.max(jnp.abs(A))
    asym = jnp.maximum(jnp.max(jnp.abs(_project(A, tm, tp))), jnp.max(jnp.abs(_project(A, tp, tm)))) / scale

    def full_sym():
        lam, X, n_real, valid = full()
        # mirror symmetry of each mode: weight of its +1 part minus that of its -1 part
        cp = jnp.sum(jnp.abs(_project(X, tp, None)) ** 2, axis=0)
        cm = jnp.sum(jnp.abs(_project(X, tm, None)) ** 2, axis=0)
        return lam, X, n_real, valid, (cp - cm) / (cp + cm)

    def split():
        Ap, Am = _project(A, tp, tp), _project(A, tm, tm)
        lam = jnp.concatenate([jnp.linalg.eigvals(Ap), jnp.linalg.eigvals(Am)])
        order, valid = _select(lam, n_modes)
        plus = order < Ap.shape[0]
        y = _half_vectors(Ap, Am, plus, lam[order])       # (h, n_modes), split coordinates
        X = jnp.where(plus[None, :], _expand(y, tp, N), _expand(y, tm, N))
        return lam[order], X, count_real(lam), valid, jnp.where(plus, 1.0, -1.0).astype(A.dtype)

    use = asym <= tolerance
    lam, X, n_real, valid, sym = jax.lax.cond(use, split, full_sym)
    return lam, X, n_real, valid, sym, use, asym


def modes(model, r, u, n_modes=40, mirror=True):
    """Lowest ``n_modes`` oscillatory modes of the axle at rest at r under u
    (:class:`Modes`). ``mirror``: split the eigenproblem where the variant
    is mirror-symmetric (exact; module docstring), False: always the full
    solve."""
    m = model.topology.n_bodies
    n = 6 * m
    A = state_matrix(model, r, u)
    # a flexible body's modal coordinates have no per-slot mirror image (a
    # mode is symmetric or not as a whole): the full solve
    basis = mirror_basis(model.topology.body_names) if mirror and not model.topology.flex_bodies else None
    lam_s, X_s, n_real, valid, sym, use, asym = lowest_modes(A, n_modes, basis)
    w = jnp.abs(lam_s)
    nan = jnp.nan
    frequency = jnp.where(valid, w / (2 * jnp.pi), nan)
    zeta = jnp.where(valid, -jnp.real(lam_s) / w, nan)
    # kinetic energy per body from the velocity part of each eigenvector
    xv = X_s[n:].T.reshape(n_modes, m, 6)
    vt, om = xv[..., :3], xv[..., 3:]
    t_trans = model.mass[None, :] * jnp.sum(jnp.abs(vt) ** 2, axis=-1)
    t_rot = jnp.real(jnp.einsum("kbi,bij,kbj->kb", jnp.conj(om), model.inertia.astype(om.dtype), om))
    T = 0.5 * (t_trans + t_rot)
    body_energy = T / jnp.sum(T, axis=1, keepdims=True)
    # elastic energy per bushing from the coordinate part
    dmap, kd = _bushing_deflection_map(model, r)
    xr = X_s[:n].T.reshape(n_modes, m, 6)
    dre = jax.vmap(dmap)(jnp.real(xr))
    dim = jax.vmap(dmap)(jnp.imag(xr))
    V = 0.5 * jnp.sum(kd[None] * (dre ** 2 + dim ** 2), axis=-1)
    bushing_energy = V / jnp.sum(V, axis=1, keepdims=True)
    mask = valid[:, None]
    return Modes(frequency=frequency, damping_ratio=zeta,
                 eigenvalue=jnp.where(valid, lam_s, nan),
                 body_energy=jnp.where(mask, body_energy, nan),
                 bushing_energy=jnp.where(mask, bushing_energy, nan),
                 n_overdamped=n_real, symmetry=jnp.where(valid, sym, nan), mirror=use, asymmetry=asym)
