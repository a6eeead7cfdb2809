"""Craig-Bampton reduction of an FE model to a floating-frame modal body.

The deformation of a flexible body relative to its moving reference frame is
a Ritz series over a few shape functions (Lion, "Flexible
Mehrkörpersysteme in der Fahrzeugsimulation", Gl. 1-8):

1. Static constraint modes: the interior DOF u_i follow a unit displacement
   or rotation of one interface DOF u_b with all other interface DOF held,
   ``u_i = -K_ii^-1 K_ib u_b`` (Gl. 2); all 6 DOF of every interface node.
2. Fixed-interface normal modes: ``K_ii phi = omega^2 M_ii phi`` with the
   interface clamped (Gl. 3), the lowest ``n_modes`` or all up to a cutoff
   frequency.

Together they span ``u = T p`` (Gl. 4), with ``M_cb = T^T M T`` and
``K_cb = T^T K T``. The static modes make every interface load case exact
statically; the normal modes carry the dynamics. Free-free frequencies come
out within about 1 % up to roughly half the cutoff and degrade towards it
(a beam-frame axle: under 0.7 % below half the cutoff, up to 15 % just
under it), hence a cutoff of at least twice the highest frequency of
interest.

Floating frame. The columns of T are not orthogonal and contain the rigid-
body motions, which in the floating-frame formulation belong to the 6
reference coordinates. They are removed as in Gl. 5-8 (the free-free
eigenproblem of the CB model), done so that no near-zero eigenvalue has to
be told from a small elastic one: the rigid motions lie in the CB space
exactly (a rigid motion of the interface nodes has the rigid motion of the
interior as its static completion, as K annihilates rigid motion), so the CB
space is restricted to its M-orthogonal complement of the rigid motions and
the free-free eigenproblem is solved there. The resulting elastic modes are
mass-normalised (modal mass the identity, modal stiffness diag(omega^2)),
M-orthogonal to every rigid motion to round-off, and span the CB space
together with the rigid motions, so no information is lost (the static
interface load cases stay exact). As the elastic modes are M-orthogonal to
rigid motion, the reference frame is a mean-axis (Tisserand) frame to first
order: the translational and rotational couplings vanish at q = 0.

Inertia invariants, numbered I1..I9 as in the usual list of nine
(Adams/Flex), with the names of the standard input data (SID, Wallrapp)
where there is one: all with respect to the origin and axes of the node
coordinates (the body reference frame) and formed with the FE mass matrix
itself, so consistent mass and rotary inertia enter exactly (no lumping):

* I1 ``mass``, I2 ``first_moment`` (m times the centre of mass, SID
  ``md_CM``), I7 ``inertia`` (the inertia tensor at the reference point, SID
  ``J``): the rigid-body mass matrix ``R^T M R`` of the rigid-body modes R;
* I3 ``translational_coupling`` and I4 ``rotational_coupling`` (3 x n, SID
  ``Ct`` and ``Cr``);
* I6 ``modal_mass`` (the identity, SID ``Me``) and ``modal_stiffness`` (SID
  ``Ke``);
* I5 ``rotational_coupling_gradient`` and I8 ``inertia_gradient``: the first-
  order change of the rotational coupling and of the inertia tensor with the
  modal coordinates q, ``Cr(q) = Cr + sum_j q_j I5[j]`` and
  ``J(q) = J + sum_j q_j (I8[j] + I8[j]^T)``, the body's rigid rotation
  taken about the deformed node positions (nodal rotary inertia carried
  along unchanged).

I9, the second-order change of the inertia tensor (quadratic in q), is not
kept: the linear elastic model is consistent to first order in the
deformation only (K has no geometric stiffening), and quadratic inertia
terms without the matching geometric stiffness do not improve accuracy
(they can worsen the spin softening of rotating flexible bodies).
"""
from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import tempfile
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.sparse.linalg

from sweep.axle.fe.fe_import import DOF_PER_NODE, FlexibleBodyError, check_model

log = logging.getLogger("sweep")

DENSE_EIGEN_LIMIT = 3000    # interior DOF up to which the fixed-interface modes come from a dense eigh
RIGID_TOL = 1e-6            # |K r| / (max|K| max|r|) allowed for the rigid-body modes r of a free structure
CACHE_FORMAT = 1
_LEVI_CIVITA = np.zeros((3, 3, 3))
_LEVI_CIVITA[[0, 1, 2], [1, 2, 0], [2, 0, 1]] = 1.0
_LEVI_CIVITA[[0, 1, 2], [2, 0, 1], [1, 2, 0]] = -1.0


@dataclass(frozen=True, eq=False)
class ReducedBody:
    """A floating-frame modal body: n elastic modes plus its inertia
    invariants, float64 arrays in SI units in the body reference frame (the
    origin and axes of the FE node coordinates).

    Modal coordinates q are scaled to unit modal mass: a mode shape row is in
    m / (kg^0.5 m) = kg^-0.5 for a displacement DOF and rad / (kg^0.5 m) for
    a rotation DOF, so that ``u = mode_shapes @ q`` (m, rad) for q in
    kg^0.5 m.

    ``frequencies_hz`` (n,): free-free elastic natural frequencies (Hz),
    ascending. ``modal_mass`` (n, n): the identity (I6, SID ``Me``).
    ``modal_stiffness`` (n, n): diag((2 pi f)^2) in 1/s^2 (SID ``Ke``).
    ``mass``: kg (I1). ``first_moment`` (3,): mass times centre of mass, kg m
    (I2, SID ``md_CM``). ``inertia`` (3, 3): inertia tensor at the reference
    point, kg m^2 (I7, SID ``J``). ``translational_coupling`` (3, n) and
    ``rotational_coupling`` (3, n): I3 / I4 (SID ``Ct`` / ``Cr``), kg^0.5
    and kg^0.5 m; zero to round-off for modes M-orthogonal to rigid motion.
    ``rotational_coupling_gradient`` (n, 3, n): I5, ``Cr(q) = Cr + sum_j q_j
    I5[j]`` (dimensionless). ``inertia_gradient`` (n, 3, 3): I8, ``J(q) = J
    + sum_j q_j (I8[j] + I8[j]^T)``, kg^0.5 m.
    ``interface_nodes`` (k,): node indices; ``interface_positions`` (k, 3): m;
    ``interface_translation`` / ``interface_rotation`` (k, 3, n): the
    translational / rotational mode shapes at each interface node (a marker
    there moves by ``position + translation @ q`` and turns by
    ``rotation @ q`` relative to the reference frame).
    ``mode_shapes`` (N, n): the elastic modes at all FE DOF (node-major).
    ``fixed_interface_frequencies_hz`` (n_k,): the kept normal modes of the
    interface-clamped structure (Hz).
    """
    frequencies_hz: np.ndarray
    modal_mass: np.ndarray
    modal_stiffness: np.ndarray
    mass: np.ndarray
    first_moment: np.ndarray
    inertia: np.ndarray
    translational_coupling: np.ndarray
    rotational_coupling: np.ndarray
    rotational_coupling_gradient: np.ndarray
    inertia_gradient: np.ndarray
    interface_nodes: np.ndarray
    interface_positions: np.ndarray
    interface_translation: np.ndarray
    interface_rotation: np.ndarray
    mode_shapes: np.ndarray
    fixed_interface_frequencies_hz: np.ndarray

    @property
    def n_modes(self):
        """Number of elastic modes n."""
        return len(self.frequencies_hz)

    @property
    def centre_of_mass(self):
        """Centre of mass in the body frame (m)."""
        return self.first_moment / self.mass

    def mass_matrix(self):
        """Generalised mass matrix (6 + n, 6 + n) at q = 0 for the coordinates
        (reference-point translation (m), small rotation (rad), q)."""
        n, c = self.n_modes, _skew(self.first_moment)
        Mg = np.zeros((6 + n, 6 + n))
        Mg[:3, :3] = self.mass * np.eye(3)
        Mg[:3, 3:6], Mg[3:6, :3] = -c, c
        Mg[3:6, 3:6] = self.inertia
        Mg[:3, 6:], Mg[3:6, 6:] = self.translational_coupling, self.rotational_coupling
        Mg[6:, :6] = Mg[:6, 6:].T
        Mg[6:, 6:] = self.modal_mass
        return Mg

    def arrays(self):
        """The fields as a dict of numpy arrays (the cache file's content)."""
        return {f.name: np.asarray(getattr(self, f.name)) for f in dataclasses.fields(self)}


def _skew(v):
    """Cross-product matrix: ``_skew(a) @ b == cross(a, b)``."""
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


def rigid_body_modes(nodes):
    """(6 n, 6) rigid-body motions of the nodes: columns unit translations
    along x, y, z (m) and unit small rotations about x, y, z through the
    origin (rad); a node at x moves by ``omega cross x`` and turns by omega."""
    nodes = np.asarray(nodes, dtype=float)
    R = np.zeros((len(nodes), DOF_PER_NODE, 6))
    R[:, :3, :3] = np.eye(3)
    R[:, 3:, 3:] = np.eye(3)
    R[:, :3, 3:] = np.einsum("abc,kc->kab", _LEVI_CIVITA, nodes)      # -skew(x): omega cross x
    return R.reshape(-1, 6)


def modal_damping(body, ratios):
    """Modal damping matrix (n, n) of ``body`` for damping ratios ``ratios``
    (a number or one per mode, dimensionless): ``diag(2 zeta_j omega_j)`` in
    1/s, for the unit modal masses of :class:`ReducedBody` (SID ``De``).
    Frequency-dependent damping: pass e.g. ``a * body.frequencies_hz``."""
    zeta = np.broadcast_to(np.asarray(ratios, dtype=float), body.frequencies_hz.shape)
    if (zeta < 0).any() or not np.isfinite(zeta).all():
        raise FlexibleBodyError(f"ratios = {ratios!r}: damping ratios must be finite and non-negative")
    return np.diag(2.0 * zeta * 2.0 * np.pi * body.frequencies_hz)


def _interface(interface_nodes, n_nodes):
    nodes = np.asarray(interface_nodes)
    if nodes.ndim != 1 or len(nodes) == 0 or nodes.dtype.kind not in "iu":
        raise FlexibleBodyError(f"interface_nodes = {interface_nodes!r}: need a non-empty list of node indices")
    for k, node in enumerate(nodes):
        if not 0 <= node < n_nodes:
            raise FlexibleBodyError(f"interface_nodes[{k}] = {node}: no such node "
                                    f"(the model has nodes 0..{n_nodes - 1})")
        if node in nodes[:k]:
            raise FlexibleBodyError(f"interface_nodes[{k}] = {node}: listed twice")
    return nodes.astype(np.int64)


def _fixed_interface_modes(Kii, Mii, n_modes, f_cutoff_hz):
    """Lowest eigenpairs (omega^2 in 1/s^2, M_ii-normalised vectors) of the
    interface-clamped structure: ``n_modes`` of them or all up to the cutoff."""
    n = Kii.shape[0]
    limit = None if f_cutoff_hz is None else (2.0 * np.pi * f_cutoff_hz) ** 2
    if n_modes == 0 or n == 0:
        return np.zeros(0), np.zeros((n, 0))
    if n <= DENSE_EIGEN_LIMIT:
        subset = {"subset_by_index": [0, n_modes - 1]} if limit is None else {"subset_by_value": [-np.inf, limit]}
        return scipy.linalg.eigh(Kii.toarray(), Mii.toarray(), **subset)
    k = n_modes or 16
    while True:
        w2, V = scipy.sparse.linalg.eigsh(Kii.tocsc(), k=min(k, n - 2), M=Mii.tocsc(), sigma=0.0, which="LM")
        if limit is None or w2.max() > limit or k >= n - 2:
            break
        k *= 2
    order = np.argsort(w2)
    w2, V = w2[order], V[:, order]
    keep = slice(None) if limit is None else w2 <= limit
    w2, V = w2[keep], V[:, keep]
    return w2, V / np.sqrt(np.einsum("ij,ij->j", V, Mii @ V))


def _craig_bampton_basis(model, boundary, n_modes, f_cutoff_hz):
    """The CB transformation T (N, nb + nk) with ``u = T p``, ``p = (u_b,
    modal amplitudes)``, and the fixed-interface omega^2 (1/s^2)."""
    N = model.K.shape[0]
    interior = np.setdiff1d(np.arange(N), boundary)
    Kii, Kib = model.K[interior][:, interior], model.K[interior][:, boundary]
    Mii = model.M[interior][:, interior]
    if len(interior):
        try:
            static = -scipy.sparse.linalg.splu(Kii.tocsc()).solve(Kib.toarray())
        except RuntimeError as err:                         # an exactly singular K_ii
            raise FlexibleBodyError(f"K: the structure with its interface nodes clamped is not held ({err}); "
                                    f"a part without an interface node or a mechanism?") from None
    else:
        static = np.zeros((0, len(boundary)))
    if not np.isfinite(static).all():
        raise FlexibleBodyError("K: the static constraint modes are not finite (K_ii singular?)")
    w2, normal = _fixed_interface_modes(Kii, Mii, n_modes, f_cutoff_hz)
    T = np.zeros((N, len(boundary) + len(w2)))
    T[boundary, :len(boundary)] = np.eye(len(boundary))
    T[interior, :len(boundary)] = static
    T[np.ix_(interior, np.arange(len(boundary), T.shape[1]))] = normal
    return T, w2


def reduce(M, K, nodes, interface_nodes, n_modes=None, f_cutoff_hz=None, *, rigid_tol=RIGID_TOL):
    """Craig-Bampton reduction of a free FE model to a :class:`ReducedBody`.

    ``M``, ``K``: mass (kg ...) and stiffness (N/m ...) matrices of the free
    (unsupported) structure, dense or scipy.sparse, node-major 6 DOF per node
    (checked by :func:`sweep.axle.fe.fe_import.check_model`). ``nodes``
    (n, 3): node positions in the body frame (m). ``interface_nodes``: the
    nodes where joints and force elements attach (all 6 DOF become static
    constraint modes). Exactly one of ``n_modes`` (number of fixed-interface
    normal modes, 0 for a static (Guyan) reduction) and ``f_cutoff_hz``
    (keep the normal modes up to this frequency, Hz). ``rigid_tol``: how
    far ``K`` may be from annihilating rigid motion (relative).

    The body has ``6 * len(interface_nodes) + n_normal - 6`` elastic modes
    (the CB space minus the 6 rigid motions; see the module docstring)."""
    model = check_model(M, K, nodes)
    iface = _interface(interface_nodes, len(model.nodes))
    if (n_modes is None) == (f_cutoff_hz is None):
        raise FlexibleBodyError(f"n_modes = {n_modes!r}, f_cutoff_hz = {f_cutoff_hz!r}: give exactly one of them")
    if n_modes is not None and not (isinstance(n_modes, (int, np.integer)) and n_modes >= 0):
        raise FlexibleBodyError(f"n_modes = {n_modes!r}: need a non-negative integer")
    if f_cutoff_hz is not None and not (np.isfinite(f_cutoff_hz) and f_cutoff_hz > 0):
        raise FlexibleBodyError(f"f_cutoff_hz = {f_cutoff_hz!r}: need a positive frequency")
    boundary = (DOF_PER_NODE * iface[:, None] + np.arange(DOF_PER_NODE)).ravel()
    if n_modes is not None and n_modes > model.K.shape[0] - len(boundary):
        raise FlexibleBodyError(f"n_modes = {n_modes}: the model has only {model.K.shape[0] - len(boundary)} "
                                f"interior DOF")

    rigid = rigid_body_modes(model.nodes)
    residual = np.abs(model.K @ rigid).max(axis=0) / (abs(model.K).max() * np.abs(rigid).max(axis=0))
    if residual.max() > rigid_tol:
        j = int(np.argmax(residual))
        raise FlexibleBodyError(f"K: rigid-body motion {['x', 'y', 'z', 'rx', 'ry', 'rz'][j]} is not free of "
                                f"elastic forces (|K r| = {residual[j]:.2g} of max|K| max|r|, tolerance "
                                f"{rigid_tol:g}); the floating-frame body needs the free, unsupported FE model")

    T, w2_fixed = _craig_bampton_basis(model, boundary, n_modes, f_cutoff_hz)
    Mcb, Kcb = T.T @ (model.M @ T), T.T @ (model.K @ T)
    Mcb, Kcb = 0.5 * (Mcb + Mcb.T), 0.5 * (Kcb + Kcb.T)
    # rigid motions in CB coordinates: their interface values, no normal-mode part
    rigid_cb = np.zeros((T.shape[1], 6))
    rigid_cb[:len(boundary)] = rigid[boundary]
    Q = scipy.linalg.qr(Mcb @ rigid_cb, mode="full")[0]
    elastic = Q[:, 6:]                                      # the M-orthogonal complement of the rigid motions
    w2, Y = scipy.linalg.eigh(elastic.T @ Kcb @ elastic, elastic.T @ Mcb @ elastic)
    shapes = T @ (elastic @ Y)
    big = np.argmax(np.abs(shapes), axis=0)                 # a deterministic sign: largest entry positive
    shapes *= np.sign(shapes[big, np.arange(shapes.shape[1])])
    return _body(model, iface, shapes, w2, w2_fixed, rigid)


def _body(model, iface, shapes, w2, w2_fixed, rigid):
    """The invariants of the elastic ``shapes`` (N, n) with ``w2`` (1/s^2)."""
    n_nodes, n = len(model.nodes), shapes.shape[1]
    M_rigid = model.M @ rigid                               # (N, 6)
    rigid_mass = rigid.T @ M_rigid
    mass = np.trace(rigid_mass[:3, :3]) / 3.0
    B = 0.5 * (rigid_mass[:3, 3:] - rigid_mass[:3, 3:].T)  # = -skew(m c), its skew part
    first_moment = -np.array([B[2, 1], B[0, 2], B[1, 0]])
    coupling = M_rigid.T @ shapes                           # (6, n)
    # node-major views: translational rows of the mode shapes (k, 3, n), of M @ shapes and of M @ rotations
    P = shapes.reshape(n_nodes, DOF_PER_NODE, n)
    P_t = P[:, :3]
    F_modes = (model.M @ shapes).reshape(n_nodes, DOF_PER_NODE, n)[:, :3]
    F_rot = M_rigid.reshape(n_nodes, DOF_PER_NODE, 6)[:, :3, 3:]
    # rigid rotation about deformed node positions: d/dq_j of (omega cross (x + u)) = omega cross phi_j
    I5 = np.einsum("abc,kbj,kcl->jal", _LEVI_CIVITA, P_t, F_modes)
    I8 = np.einsum("cbd,kca,kdj->jab", _LEVI_CIVITA, F_rot, P_t)
    return ReducedBody(
        frequencies_hz=np.sqrt(np.maximum(w2, 0.0)) / (2.0 * np.pi),
        modal_mass=np.eye(n), modal_stiffness=np.diag(w2),
        mass=np.asarray(mass), first_moment=first_moment, inertia=0.5 * (rigid_mass[3:, 3:] + rigid_mass[3:, 3:].T),
        translational_coupling=coupling[:3], rotational_coupling=coupling[3:],
        rotational_coupling_gradient=I5, inertia_gradient=I8,
        interface_nodes=iface, interface_positions=model.nodes[iface],
        interface_translation=P[iface, :3], interface_rotation=P[iface, 3:],
        mode_shapes=shapes,
        fixed_interface_frequencies_hz=np.sqrt(np.maximum(w2_fixed, 0.0)) / (2.0 * np.pi))


def cache_key(M, K, nodes, interface_nodes, n_modes=None, f_cutoff_hz=None):
    """SHA-256 (hex) of a reduction's inputs: the checked M and K (canonical
    CSR bytes), nodes, interface nodes, ``n_modes`` / ``f_cutoff_hz``, the
    cache format and the source of this module (a changed algorithm is a new
    key)."""
    model = check_model(M, K, nodes)
    h = hashlib.sha256(f"craig-bampton/{CACHE_FORMAT}".encode())
    with open(__file__, "rb") as f:
        h.update(f.read())
    for A in (model.M, model.K):
        for part in (np.asarray(A.shape, np.int64), A.indptr.astype(np.int64), A.indices.astype(np.int64), A.data):
            h.update(np.ascontiguousarray(part).tobytes())
    h.update(model.nodes.tobytes())
    h.update(np.asarray(interface_nodes, dtype=np.int64).tobytes())
    h.update(repr((n_modes, None if f_cutoff_hz is None else float(f_cutoff_hz).hex())).encode())
    return h.hexdigest()


def _digest(arrays):
    h = hashlib.sha256()
    for name in sorted(arrays):
        h.update(name.encode() + str(arrays[name].dtype).encode() + repr(arrays[name].shape).encode())
        h.update(np.ascontiguousarray(arrays[name]).tobytes())
    return h.hexdigest()


def _read_cache(path, key):
    """The body stored at ``path`` for ``key``, or None when missing, unreadable,
    for another key or not matching its stored digest."""
    if not os.path.exists(path):
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
        stored_key, digest = str(arrays.pop("_key")), str(arrays.pop("_digest"))
        names = {f.name for f in dataclasses.fields(ReducedBody)}
        if stored_key != key or digest != _digest(arrays) or set(arrays) != names:
            raise ValueError("key, digest or fields do not match")
        return ReducedBody(**arrays)
    except Exception as err:                                # a damaged file of any kind is recomputed
        log.warning(f"flexible body cache {path}: not usable ({err}); reducing again")
        return None


def reduce_cached(M, K, nodes, interface_nodes, n_modes=None, f_cutoff_hz=None, *, cache_dir):
    """:func:`reduce` with its result kept in ``cache_dir`` as
    ``craig_bampton-<sha256>.npz`` (:func:`cache_key`). A file that cannot be
    read, belongs to another key or whose content does not match its stored
    digest is recomputed and replaced; files are written atomically."""
    key = cache_key(M, K, nodes, interface_nodes, n_modes, f_cutoff_hz)
    path = os.path.join(cache_dir, f"craig_bampton-{key}.npz")
    body = _read_cache(path, key)
    if body is not None:
        return body
    body = reduce(M, K, nodes, interface_nodes, n_modes, f_cutoff_hz)
    arrays = body.arrays()
    os.makedirs(cache_dir, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cache_dir, prefix=".craig_bampton-", suffix=".npz")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, _key=np.asarray(key), _digest=np.asarray(_digest(arrays)), **arrays)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return body
