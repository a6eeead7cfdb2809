"""External finite-element exports: the second source of a flexible body's
mass and stiffness matrices, and the checks every source goes through.

An FE program exports the assembled mass matrix M (kg, kg m, kg m^2) and
stiffness matrix K (N/m, N/rad, N m/rad) of the free structure and the node
positions (m, body frame). The DOF order is node-major with 6 DOF per node,
``ux uy uz rx ry rz`` of node i at ``6i .. 6i+5``; nodes are numbered by
their row in the node table (FE grid ids must be mapped to rows by the
exporter). Two file layouts:

* one ``.npz`` with ``nodes`` (n, 3) and, for each of ``M`` and ``K``, either
  the dense matrix under its name or the CSR triplet ``M_data``,
  ``M_indices``, ``M_indptr`` (optional ``M_shape``);
* Matrix Market files (``scipy.io.mmread``) for M and K and a node table as
  ``.npy`` or CSV (3 columns x, y, z; an optional header line).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import scipy.io
import scipy.linalg
import scipy.sparse as sp
import scipy.sparse.linalg

DOF_PER_NODE = 6
SYMMETRY_RTOL = 1e-9        # max |A - A^T| allowed, relative to max |A|
PSD_DENSE_LIMIT = 4000      # DOF up to which the definiteness check uses a dense eigensolver


class FlexibleBodyError(ValueError):
    """A flexible-body input is invalid; the message names the field and value."""


@dataclass(frozen=True, eq=False)
class FEModel:
    """A checked FE model: ``M``, ``K`` scipy.sparse CSR float64 (N, N) and
    ``nodes`` (N / 6, 3) float64 positions in the body frame (m)."""
    M: sp.csr_array
    K: sp.csr_array
    nodes: np.ndarray


def _as_csr(name, A):
    """A dense or sparse square matrix as float64 CSR, or an error naming it."""
    # a copy: the canonical form below is made in place
    A = sp.csr_array(A, dtype=np.float64, copy=True) if sp.issparse(A) else sp.csr_array(np.asarray(A, np.float64))
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise FlexibleBodyError(f"{name}: need a square matrix, got shape {A.shape}")
    if not np.isfinite(A.data).all():
        raise FlexibleBodyError(f"{name}: has non-finite entries")
    A.sum_duplicates()
    A.eliminate_zeros()                                     # canonical: equal matrices, equal cache keys
    return A


def _check_symmetric(name, A, rtol):
    D = abs(A - A.T).tocoo()
    scale = abs(A).max()
    if D.nnz and D.data.max() > rtol * scale:
        i = int(np.argmax(D.data))
        raise FlexibleBodyError(f"{name} is not symmetric: |{name}[{D.row[i]}, {D.col[i]}] - {name}[{D.col[i]}, "
                                f"{D.row[i]}]| = {D.data[i]:.3g}, {D.data[i] / scale:.2g} of max |{name}| "
                                f"(tolerance {rtol:g})")


def _smallest_eigenvalue(A):
    if A.shape[0] <= PSD_DENSE_LIMIT:
        return scipy.linalg.eigvalsh(A.toarray(), subset_by_index=[0, 0])[0]
    return scipy.sparse.linalg.eigsh(A, k=1, which="SA", return_eigenvectors=False, tol=1e-8)[0]


def check_model(M, K, nodes, *, symmetry_rtol=SYMMETRY_RTOL, check_definite=False):
    """Check and normalise an FE model; returns a :class:`FEModel`.

    ``M``, ``K``: dense arrays or scipy.sparse matrices, square, of equal
    size ``6 * len(nodes)``, finite and symmetric to ``symmetry_rtol``
    (relative to the largest entry). ``nodes``: (n, 3) finite positions (m).
    ``check_definite``: also require K positive semi-definite and M positive
    semi-definite with a positive diagonal (smallest eigenvalue above
    ``-1e-9`` of the largest entry; an eigen solve, so off by default).
    Errors (:class:`FlexibleBodyError`) name the field and the value."""
    nodes = np.asarray(nodes, dtype=np.float64)
    if nodes.ndim != 2 or nodes.shape[1] != 3 or not np.isfinite(nodes).all():
        raise FlexibleBodyError(f"nodes: need an (n, 3) table of finite positions, got shape {nodes.shape}")
    mats = {"M": _as_csr("M", M), "K": _as_csr("K", K)}
    for name, A in mats.items():
        if A.shape[0] != DOF_PER_NODE * len(nodes):
            raise FlexibleBodyError(f"{name}: has {A.shape[0]} rows but nodes has {len(nodes)} rows "
                                    f"({DOF_PER_NODE} DOF per node need {DOF_PER_NODE * len(nodes)})")
        _check_symmetric(name, A, symmetry_rtol)
    diagonal = mats["M"].diagonal()
    if (diagonal <= 0.0).any():
        i = int(np.argmax(diagonal <= 0.0))
        raise FlexibleBodyError(f"M[{i}, {i}] = {diagonal[i]!r}: the mass matrix needs a positive diagonal "
                                f"(node {i // DOF_PER_NODE}, DOF {i % DOF_PER_NODE})")
    if check_definite:
        for name, A in mats.items():
            low = _smallest_eigenvalue(A)
            if low < -1e-9 * abs(A).max():
                raise FlexibleBodyError(f"{name} is not positive semi-definite: smallest eigenvalue {low:.3g}")
    return FEModel(mats["M"], mats["K"], nodes)


def _npz_matrix(data, name, path):
    if name in data.files:
        return data[name]
    parts = [f"{name}_{p}" for p in ("data", "indices", "indptr")]
    if not all(p in data.files for p in parts):
        raise FlexibleBodyError(f"{path}: has no '{name}' (dense) nor {', '.join(repr(p) for p in parts)} (CSR); "
                                f"found {sorted(data.files)}")
    indptr = data[parts[2]]
    shape = tuple(data[f"{name}_shape"]) if f"{name}_shape" in data.files else (len(indptr) - 1,) * 2
    return sp.csr_array((data[parts[0]], data[parts[1]], indptr), shape=shape)


def load_npz(path, **checks):
    """Read an FE export ``.npz`` (``M``, ``K`` dense or as CSR triplets,
    ``nodes``) and check it (:func:`check_model`, keyword ``checks``)."""
    with np.load(path, allow_pickle=False) as data:
        if "nodes" not in data.files:
            raise FlexibleBodyError(f"{path}: has no 'nodes' (n x 3 positions); found {sorted(data.files)}")
        return check_model(_npz_matrix(data, "M", path), _npz_matrix(data, "K", path), data["nodes"], **checks)


def _node_table(path):
    if os.fspath(path).endswith(".npy"):
        return np.load(path, allow_pickle=False)
    with open(path) as f:
        lines = [line for line in f if line.strip() and not line.lstrip().startswith("#")]
    try:
        float(lines[0].split(",")[0])
    except (ValueError, IndexError):
        lines = lines[1:]                                   # a header line
    try:
        return np.loadtxt(lines, delimiter=",", ndmin=2)
    except ValueError as err:
        raise FlexibleBodyError(f"{path}: not a CSV table of node positions x, y, z ({err})") from None


def load_matrix_market(m_path, k_path, nodes_path, **checks):
    """Read M and K from Matrix Market files and the node table from
    ``.npy`` or CSV, and check them (:func:`check_model`, keyword ``checks``)."""
    return check_model(scipy.io.mmread(m_path), scipy.io.mmread(k_path), _node_table(nodes_path), **checks)
