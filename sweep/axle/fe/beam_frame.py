"""3D beam-frame finite elements: the built-in source of a flexible body's
mass and stiffness matrices.

A frame is a table of nodes (positions in the body frame, m) joined by
straight two-node beam elements. Every node has 6 degrees of freedom in the
body frame, ``ux, uy, uz`` (m) and the small rotations ``rx, ry, rz`` (rad);
the global vector is node-major (node i at ``6i .. 6i+5``), the layout
:mod:`sweep.axle.fe.fe_import` and :mod:`sweep.axle.fe.craig_bampton` expect.

Element local axes: x from the first node to the second, y the section's
orientation vector with its x component removed, z = x cross y. Axial
displacement and twist are linear; bending uses the interdependent
interpolation of the Timoshenko beam (Friedman & Kosmatka 1993), which with no
shear flexibility is the cubic Hermite interpolation of the Euler-Bernoulli
beam. Both interpolations solve the homogeneous beam equations exactly, so a
frame loaded only at its nodes has the exact static solution at the nodes,
and they represent rigid motion exactly. Stiffness and the consistent mass
(translational plus rotary inertia of the section) are integrated from the
shape functions by 4-point Gauss quadrature, exact for these polynomials.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from sweep.axle.fe.fe_import import DOF_PER_NODE, FlexibleBodyError

# shear area factor kappa (shear area = kappa * A) of a Timoshenko element whose
# section gives no Ay / Az: the value of a solid rectangle
SHEAR_CORRECTION = 5.0 / 6.0

_GAUSS_X, _GAUSS_W = np.polynomial.legendre.leggauss(4)
_XI, _WEIGHT = 0.5 * (_GAUSS_X + 1.0), 0.5 * _GAUSS_W      # on [0, 1]


@dataclass(frozen=True)
class Section:
    """Cross-section and material of a beam element, SI units.

    ``E`` Young's modulus (Pa), ``G`` shear modulus (Pa), ``A`` area (m^2),
    ``Iy`` / ``Iz`` second moments of area about the section's local y / z
    axis (m^4; ``Iz`` resists bending in the local x-y plane, ``Iy`` in x-z),
    ``J`` torsion constant (m^4, Saint-Venant; equal to ``Iy + Iz`` only for
    circular sections), ``rho`` density (kg/m^3). ``Ay`` / ``Az`` are the
    shear areas (m^2) for shear force along local y / z, used by Timoshenko
    elements only (default ``SHEAR_CORRECTION * A``). The shear centre is the
    centroid (no offset).
    """
    E: float
    G: float
    A: float
    Iy: float
    Iz: float
    J: float
    rho: float
    Ay: float | None = None
    Az: float | None = None

    def check(self, where):
        """Raise :class:`FlexibleBodyError` naming ``where.field = value`` for
        a non-positive or non-finite property."""
        for name in ("E", "G", "A", "Iy", "Iz", "J", "rho", "Ay", "Az"):
            value = getattr(self, name)
            if value is None and name in ("Ay", "Az"):
                continue
            if not (np.isfinite(value) and value > 0.0):
                raise FlexibleBodyError(f"{where}.{name} = {value!r}: must be a positive finite number")


@dataclass(frozen=True, eq=False)
class BeamFrame:
    """A frame of straight beam elements, the input of :func:`assemble`.

    ``nodes`` (n, 3): node positions in the body frame (m). ``elements``
    (e, 2): the two node indices of each element. ``sections``: one
    :class:`Section` for all elements or one per element. ``orientation``:
    the reference vector of the sections' local y axis, one (3,) vector for
    all elements or (e, 3); ``None`` puts the local z axis in the vertical
    plane through the element, upwards (local y = body z cross x), and local
    y along the body y axis for elements along z. ``timoshenko``: shear-flexible elements (shear
    areas of the sections) instead of Euler-Bernoulli. Checked on
    construction; an error names the field and value.
    """
    nodes: np.ndarray
    elements: np.ndarray
    sections: tuple
    orientation: np.ndarray | None = None
    timoshenko: bool = False

    def __post_init__(self):
        nodes = np.array(self.nodes, dtype=float)
        if nodes.ndim != 2 or nodes.shape[1] != 3 or len(nodes) < 2 or not np.isfinite(nodes).all():
            raise FlexibleBodyError(f"BeamFrame.nodes: need an (n >= 2, 3) table of finite positions, "
                                    f"got shape {nodes.shape}")
        elements = np.array(self.elements)
        if elements.ndim != 2 or elements.shape[1] != 2 or len(elements) == 0 or elements.dtype.kind not in "iu":
            raise FlexibleBodyError(f"BeamFrame.elements: need an (e >= 1, 2) table of node indices, "
                                    f"got {elements.dtype} of shape {elements.shape}")
        for k, (a, b) in enumerate(elements):
            for node in (a, b):
                if not 0 <= node < len(nodes):
                    raise FlexibleBodyError(f"BeamFrame.elements[{k}] = [{a}, {b}]: node {node} does not exist "
                                            f"(the frame has nodes 0..{len(nodes) - 1})")
        sections = (self.sections,) if isinstance(self.sections, Section) else tuple(self.sections)
        if len(sections) not in (1, len(elements)) or not all(isinstance(s, Section) for s in sections):
            raise FlexibleBodyError(f"BeamFrame.sections: need one Section or one per element ({len(elements)}), "
                                    f"got {len(sections)} entries")
        for k, s in enumerate(sections):
            s.check(f"BeamFrame.sections[{k}]")
        object.__setattr__(self, "nodes", nodes)
        object.__setattr__(self, "elements", elements.astype(np.int64))
        object.__setattr__(self, "sections", sections)
        object.__setattr__(self, "orientation", self._orientations())

    def section(self, k):
        """The :class:`Section` of element ``k``."""
        return self.sections[k if len(self.sections) > 1 else 0]

    def _orientations(self):
        """(e, 3) orientation vectors, checked against the element axes."""
        axes = self.nodes[self.elements[:, 1]] - self.nodes[self.elements[:, 0]]
        lengths = np.linalg.norm(axes, axis=1)
        scale = np.abs(self.nodes).max() + lengths.max()
        for k, length in enumerate(lengths):
            if length <= 1e-12 * scale:
                a, b = self.elements[k]
                raise FlexibleBodyError(f"BeamFrame.elements[{k}] = [{a}, {b}]: zero length "
                                        f"(nodes at {self.nodes[a].tolist()} and {self.nodes[b].tolist()})")
        axes /= lengths[:, None]
        if self.orientation is None:
            along_z = np.abs(axes[:, 2]) > 0.99
            return np.where(along_z[:, None], [0.0, 1.0, 0.0], np.cross([0.0, 0.0, 1.0], axes))
        given = np.array(self.orientation, dtype=float)
        vectors = np.broadcast_to(given, axes.shape) if given.shape == (3,) else given
        if vectors.shape != axes.shape or not np.isfinite(vectors).all():
            raise FlexibleBodyError(f"BeamFrame.orientation: need a (3,) vector or one per element "
                                    f"{axes.shape}, got shape {given.shape}")
        for k, (v, x) in enumerate(zip(vectors, axes)):
            norm = np.linalg.norm(v)
            if norm == 0.0 or np.linalg.norm(np.cross(v / norm, x)) < 1e-6:
                label = "BeamFrame.orientation" + ("" if given.shape == (3,) else f"[{k}]")
                raise FlexibleBodyError(f"{label} = {v.tolist()} is parallel to the axis of element {k} "
                                        f"(nodes {self.elements[k].tolist()}, direction {x.round(6).tolist()})")
        return np.array(vectors)

    def rotation(self, k):
        """3x3 rotation of element ``k``: rows are its local x, y, z axes in
        the body frame."""
        a, b = self.elements[k]
        x = self.nodes[b] - self.nodes[a]
        x /= np.linalg.norm(x)
        y = self.orientation[k] - (self.orientation[k] @ x) * x
        y /= np.linalg.norm(y)
        return np.array([x, y, np.cross(x, y)])

    def length(self, k):
        """Length of element ``k`` (m)."""
        a, b = self.elements[k]
        return float(np.linalg.norm(self.nodes[b] - self.nodes[a]))


def _bending(length, E, I, rho, A, G_As):
    """Stiffness and consistent mass (4x4) of one bending plane, DOF
    ``(v1, theta1, v2, theta2)``, theta the section rotation (dv/dx without shear).

    ``G_As`` is the shear stiffness G * A_s (N); ``None`` means Euler-
    Bernoulli (no shear strain). Timoshenko interdependent interpolation with
    ``phi = 12 E I / (G A_s L^2)``."""
    L, xi = length, _XI
    phi = 0.0 if G_As is None else 12.0 * E * I / (G_As * L * L)
    mu = 1.0 / (1.0 + phi)
    one = np.ones_like(xi)
    # displacement v, rotation theta and their x derivatives at the Gauss points (4 points x 4 DOF)
    v = mu * np.array([2 * xi**3 - 3 * xi**2 - phi * xi + 1 + phi,
                       L * (xi**3 - (2 + phi / 2) * xi**2 + (1 + phi / 2) * xi),
                       -2 * xi**3 + 3 * xi**2 + phi * xi,
                       L * (xi**3 - (1 - phi / 2) * xi**2 - phi / 2 * xi)]).T
    dv = mu / L * np.array([6 * xi**2 - 6 * xi - phi * one,
                            L * (3 * xi**2 - (4 + phi) * xi + (1 + phi / 2) * one),
                            -6 * xi**2 + 6 * xi + phi * one,
                            L * (3 * xi**2 - (2 - phi) * xi - phi / 2 * one)]).T
    theta = mu * np.array([6 / L * (xi**2 - xi), 3 * xi**2 - (4 + phi) * xi + 1 + phi,
                           -6 / L * (xi**2 - xi), 3 * xi**2 - (2 - phi) * xi]).T
    dtheta = mu / L * np.array([6 / L * (2 * xi - 1), 6 * xi - 4 - phi, -6 / L * (2 * xi - 1), 6 * xi - 2 + phi]).T
    w = _WEIGHT * L
    K = E * I * np.einsum("g,gi,gj->ij", w, dtheta, dtheta)
    if G_As is not None:
        gamma = dv - theta                                   # shear strain, constant along the element
        K += G_As * np.einsum("g,gi,gj->ij", w, gamma, gamma)
    M = rho * (A * np.einsum("g,gi,gj->ij", w, v, v) + I * np.einsum("g,gi,gj->ij", w, theta, theta))
    return K, M


def element_matrices(frame, k):
    """Stiffness and consistent mass (12x12, body frame) of element ``k``,
    DOF ``(node a: ux uy uz rx ry rz, node b: ...)``; N/m, N/rad, N m/rad and
    kg, kg m, kg m^2."""
    s, L = frame.section(k), frame.length(k)
    K, M = np.zeros((12, 12)), np.zeros((12, 12))
    bar_k, bar_m = np.array([[1.0, -1.0], [-1.0, 1.0]]) / L, L / 6.0 * np.array([[2.0, 1.0], [1.0, 2.0]])
    for dofs, stiffness, inertia in (([0, 6], s.E * s.A, s.rho * s.A),                # axial
                                     ([3, 9], s.G * s.J, s.rho * (s.Iy + s.Iz))):     # twist
        K[np.ix_(dofs, dofs)] = stiffness * bar_k
        M[np.ix_(dofs, dofs)] = inertia * bar_m
    # x-y plane: (uy, rz) with rz = dv/dx; x-z plane: (uz, -ry) with -ry = dw/dx
    for dofs, sign, I, As in (([1, 5, 7, 11], [1, 1, 1, 1], s.Iz, s.Ay),
                              ([2, 4, 8, 10], [1, -1, 1, -1], s.Iy, s.Az)):
        G_As = s.G * (SHEAR_CORRECTION * s.A if As is None else As) if frame.timoshenko else None
        Kb, Mb = _bending(L, s.E, I, s.rho, s.A, G_As)
        S = np.diag(sign).astype(float)
        K[np.ix_(dofs, dofs)] = S @ Kb @ S
        M[np.ix_(dofs, dofs)] = S @ Mb @ S
    T = np.kron(np.eye(4), frame.rotation(k))
    return T.T @ K @ T, T.T @ M @ T


def assemble(frame):
    """Global mass and stiffness matrices ``(M, K)`` of a :class:`BeamFrame`:
    scipy.sparse CSR, float64, (6n, 6n), node-major DOF in the body frame
    (kg / kg m / kg m^2 and N/m / N/rad / N m/rad)."""
    rows, cols, k_vals, m_vals = [], [], [], []
    for k, (a, b) in enumerate(frame.elements):
        Ke, Me = element_matrices(frame, k)
        dofs = np.concatenate([DOF_PER_NODE * a + np.arange(6), DOF_PER_NODE * b + np.arange(6)])
        rows.append(np.repeat(dofs, 12))
        cols.append(np.tile(dofs, 12))
        k_vals.append(Ke.ravel())
        m_vals.append(Me.ravel())
    n = DOF_PER_NODE * len(frame.nodes)
    rows, cols = np.concatenate(rows), np.concatenate(cols)

    def csr(values):
        A = sp.csr_array((np.concatenate(values), (rows, cols)), shape=(n, n))
        A.sum_duplicates()
        return A
    return csr(m_vals), csr(k_vals)
