"""Block-sparse structure of the Jacobians and the block LU of eq. (11).

The body graph (a node per body, an edge per force element between two
non-ground bodies) fixes which 6x6 blocks of J_r, J_v and of the coefficient
matrix A (eq. 11) can be non-zero: the diagonal and one block pair per edge.
Everything here that depends only on the topology is computed once per model
structure in numpy (cached) and enters the traced functions as constant
index arrays:

* :class:`Pattern` - the non-zero blocks (slots) and per-element scatter slots;
* :class:`Elimination` - an elimination order of the bodies (minimum degree
  on the body graph; for the tree-like graphs of axles this eliminates links
  and carriers before the parts they hang on, the generalisation of the
  hand-made Schur partition of method.md), the filled pattern and a static
  schedule of *supersteps*: sets of pivots that are independent in the
  filled graph (same height in the elimination tree), factorised together.

The numeric factorisation is right-looking block LU without pivoting between
blocks, applied to ``M A = M - h g dQ/dv - (h g)^2 dQ/dr K`` (rows scaled by
the body mass matrices, so the matrix is close to symmetric positive definite
and pivoting is not needed; the residual is checked against dense LU in the
tests). All block products are unrolled multiply-adds (see
:func:`kernels.rotations.mm`) so that they vectorise over variants.
"""
from __future__ import annotations

import dataclasses
import functools

import jax.numpy as jnp
import numpy as np

from kernels.rotations import mm, mv


# ----------------------------------------------------------------------------- pattern
@dataclasses.dataclass(frozen=True, eq=False)
class Pattern:  # hashed by identity: one object per topology (model_pattern is cached)
    """Non-zero 6x6 blocks of an (m x m)-block matrix; slot ``n`` is a dump slot."""
    m: int
    rows: np.ndarray     # (n,) block row of each slot
    cols: np.ndarray     # (n,) block column
    diag: np.ndarray     # (m,) slot of (i, i)
    index: dict          # (i, j) -> slot

    @property
    def n(self):
        return len(self.rows)

    def slot(self, i, j):
        """Slot of block (i, j); the dump slot n when either is the ground (index m)."""
        if i == self.m or j == self.m:
            return self.n
        return self.index[(int(i), int(j))]


def pattern_from_edges(m, edges) -> Pattern:
    """Pattern of the diagonal plus both blocks of every edge (i, j), i != j < m."""
    keys = [(i, i) for i in range(m)]
    seen = set(keys)
    for i, j in edges:
        i, j = int(i), int(j)
        if i == j or i >= m or j >= m:
            continue
        for k in ((i, j), (j, i)):
            if k not in seen:
                seen.add(k)
                keys.append(k)
    index = {k: s for s, k in enumerate(keys)}
    rows = np.array([k[0] for k in keys], np.int32)
    cols = np.array([k[1] for k in keys], np.int32)
    return Pattern(m, rows, cols, np.arange(m, dtype=np.int32), index)


@functools.lru_cache(maxsize=64)
def model_pattern(topology) -> Pattern:
    """Block pattern of J_r, J_v and A for a model topology (cached per structure):
    an edge per force element of every group (``topology.element_groups``)."""
    edges = topology.element_bodies
    if topology.flex_bodies:         # elements at interface nodes touch the modal slots too
        from kernels.flexible import flex_edges
        edges = np.concatenate([edges.reshape(-1, 2), flex_edges(topology)])
    return pattern_from_edges(topology.n_bodies, edges)


class StaticSum:
    """y[s] = sum of x[e] over the e with ids[e] == s, for static ids.

    A scatter-add under ``vmap`` runs element by element on XLA:CPU; with the
    ids known at trace time the same sum is a few gathers of a padded index
    table plus additions (measured 2-4x faster, BENCHMARKS.md)."""

    def __init__(self, ids, n):
        ids = np.asarray(ids, np.int64).reshape(-1)
        self.n_in, self.n = len(ids), int(n)
        cnt = np.bincount(ids, minlength=self.n) if len(ids) else np.zeros(self.n, int)
        width = int(cnt.max()) if len(ids) else 0
        table = np.full((self.n, width), self.n_in, np.int32)
        fill = np.zeros(self.n, int)
        for e, s_ in enumerate(ids):
            table[s_, fill[s_]] = e
            fill[s_] += 1
        self.columns = [table[:, c] for c in range(width)]

    def __call__(self, x):
        """x (n_in, ...) -> (n, ...)."""
        if not self.columns:
            return jnp.zeros((self.n,) + x.shape[1:], x.dtype)
        xz = jnp.concatenate([x, jnp.zeros((1,) + x.shape[1:], x.dtype)])
        return sum(xz[c] for c in self.columns)


def to_dense(pattern: Pattern, blocks):
    """(n, 6, c) slot blocks -> dense (6 m, c m) matrix (c = 6 or 12 columns per block)."""
    m = pattern.m
    c = blocks.shape[-1]
    where = np.full((m, m), pattern.n, np.int32)
    where[pattern.rows, pattern.cols] = np.arange(pattern.n)
    bz = jnp.concatenate([blocks[: pattern.n], jnp.zeros((1, 6, c), blocks.dtype)])
    return bz[where].transpose(0, 2, 1, 3).reshape(6 * m, c * m)


def from_dense(pattern: Pattern, J):
    """Dense (6 m, 6 m) -> (n, 6, 6) slot blocks (entries outside the pattern are dropped)."""
    m = pattern.m
    B = J.reshape(m, 6, m, 6).transpose(0, 2, 1, 3)
    return B[pattern.rows, pattern.cols]


@functools.lru_cache(maxsize=64)
def _row_sum(pattern):
    return StaticSum(pattern.rows, pattern.m)


def matvec(pattern: Pattern, blocks, x):
    """Block-sparse product: y_i = sum_j B_ij x_j; blocks (n, 6, 6), x (m, 6) -> (m, 6)."""
    return _row_sum(pattern)(mv(blocks[: pattern.n], x[pattern.cols]))


# ----------------------------------------------------------------------------- elimination
def symbolic_elimination(m, edges, order=None):
    """Eliminate the graph's nodes one by one, connecting each node's remaining
    neighbours (the fill). ``order=None``: minimum degree (ties: lowest
    index), else the given permutation. Returns (order, fill edges)."""
    work = [set() for _ in range(m)]
    for i, j in edges:
        if i != j and i < m and j < m:
            work[i].add(j)
            work[j].add(i)
    alive = set(range(m))
    done, fill = [], []
    for step in range(m):
        k = min(alive, key=lambda n: (len(work[n]), n)) if order is None else order[step]
        nb = sorted(work[k])
        for a in nb:
            for b in nb:
                if a < b and b not in work[a]:
                    work[a].add(b)
                    work[b].add(a)
                    fill.append((a, b))
        for a in nb:
            work[a].discard(k)
        alive.remove(k)
        done.append(k)
    return done, fill


def minimum_degree_order(m, edges):
    """Minimum-degree elimination order of the graph and its fill edges."""
    return symbolic_elimination(m, edges)


@dataclasses.dataclass(frozen=True, eq=False)
class Superstep:
    pivots: np.ndarray       # (p,) body indices factorised together
    diag: np.ndarray         # (p,) filled slots of (k, k)
    low: np.ndarray          # (nl,) filled slots of L_ik (i later than k)
    low_piv: np.ndarray      # (nl,) position of k in ``pivots``
    low_row: np.ndarray      # (nl,) i
    low_col: np.ndarray      # (nl,) k
    up: np.ndarray           # (nu,) filled slots of U_kj (j later than k)
    up_piv: np.ndarray       # (nu,) position of k in ``pivots``
    up_col: np.ndarray       # (nu,) j
    up_sum: StaticSum        # (nu,) products -> pivots
    upd_target: np.ndarray   # (nt,) slot of (i, j) receiving -L_ik U_kj
    upd_l: np.ndarray        # (nt,) slot of L_ik
    upd_u: np.ndarray        # (nt,) slot of U_kj
    upd_l_local: np.ndarray  # (nt,) index of L_ik among this step's ``low``
    upd_u_local: np.ndarray  # (nt,) index of U_kj among this step's ``up``
    upd_slots: np.ndarray    # sorted unique targets
    upd_sum: StaticSum       # (nt,) contributions -> unique targets
    low_rows: np.ndarray     # sorted unique rows i of the L_ik (forward solve)
    low_sum: StaticSum


@dataclasses.dataclass(frozen=True, eq=False)
class Elimination:
    pattern: Pattern         # the pattern of A
    filled: Pattern          # A's pattern plus fill
    gather: np.ndarray       # (filled.n,) slot of A feeding each filled slot (A.n = zero block)
    order: tuple             # elimination order of the bodies
    steps: tuple             # Superstep, in elimination order
    n_fill: int

    def flops(self):
        """Floating-point operations of one factorisation and one solve (6x6 blocks)."""
        f = s = 0
        for st in self.steps:
            f += len(st.pivots) * 2 * 6 ** 3 + len(st.low) * 2 * 6 ** 3 + len(st.upd_target) * 2 * 6 ** 3
            s += 2 * 36 * (len(st.low) + len(st.up) + len(st.pivots))
        return f, s


def eliminate(pattern: Pattern, order=None) -> Elimination:
    """Symbolic block LU: order (minimum degree unless given), fill and superstep schedule."""
    m = pattern.m
    edges = [(int(i), int(j)) for i, j in zip(pattern.rows, pattern.cols) if i < j]
    if order is not None:
        order = [int(k) for k in order]
        if sorted(order) != list(range(m)):
            raise ValueError(f"order = {order} is not a permutation of the {m} bodies")
    order, fill = symbolic_elimination(m, edges, order)
    filled = pattern_from_edges(m, edges + fill)
    pos = {k: p for p, k in enumerate(order)}
    nbrs = [set() for _ in range(m)]
    for i, j in zip(filled.rows, filled.cols):
        if i != j:
            nbrs[int(i)].add(int(j))
    later = [sorted((j for j in nbrs[k] if pos[j] > pos[k]), key=pos.get) for k in range(m)]
    # elimination tree height: pivots of equal height are never adjacent in the filled graph
    height = {}
    for k in order:
        earlier = [j for j in nbrs[k] if pos[j] < pos[k]]
        height[k] = 1 + max((height[j] for j in earlier), default=-1)
    steps = []
    for h in range(max(height.values()) + 1):
        piv = [k for k in order if height[k] == h]
        at = {k: p for p, k in enumerate(piv)}
        low = [(i, k) for k in piv for i in later[k]]
        up = [(k, j) for k in piv for j in later[k]]
        upd = [(i, j, k) for k in piv for i in later[k] for j in later[k]]
        low_at = {pair: n for n, pair in enumerate(low)}
        up_at = {pair: n for n, pair in enumerate(up)}
        tgt = np.array([filled.slot(i, j) for i, j, _ in upd], np.int32)
        upd_slots, upd_ids = np.unique(tgt, return_inverse=True)
        low_rows, low_ids = np.unique(np.array([i for i, _ in low], np.int32), return_inverse=True)
        steps.append(Superstep(
            pivots=np.array(piv, np.int32),
            diag=np.array([filled.slot(k, k) for k in piv], np.int32),
            low=np.array([filled.slot(i, k) for i, k in low], np.int32),
            low_piv=np.array([at[k] for _, k in low], np.int32),
            low_row=np.array([i for i, _ in low], np.int32),
            low_col=np.array([k for _, k in low], np.int32),
            up=np.array([filled.slot(k, j) for k, j in up], np.int32),
            up_piv=np.array([at[k] for k, _ in up], np.int32),
            up_col=np.array([j for _, j in up], np.int32),
            up_sum=StaticSum([at[k] for k, _ in up], len(piv)),
            upd_target=tgt,
            upd_l=np.array([filled.slot(i, k) for i, _, k in upd], np.int32),
            upd_u=np.array([filled.slot(k, j) for _, j, k in upd], np.int32),
            upd_l_local=np.array([low_at[(i, k)] for i, _, k in upd], np.int32),
            upd_u_local=np.array([up_at[(k, j)] for _, j, k in upd], np.int32),
            upd_slots=upd_slots.astype(np.int32), upd_sum=StaticSum(upd_ids, len(upd_slots)),
            low_rows=low_rows.astype(np.int32), low_sum=StaticSum(low_ids, len(low_rows)),
        ))
    gather = np.array([pattern.index.get((int(i), int(j)), pattern.n)
                       for i, j in zip(filled.rows, filled.cols)], np.int32)
    return Elimination(pattern, filled, gather, tuple(order), tuple(steps), len(fill))


@functools.lru_cache(maxsize=64)
def model_elimination(topology) -> Elimination:
    return eliminate(model_pattern(topology))


# ----------------------------------------------------------------------------- numeric
def inv6(D):
    """Inverse of (..., 6, 6) blocks by Gauss-Jordan without pivoting (unrolled).

    Used on diagonal blocks of the mass-scaled coefficient matrix, which are
    close to symmetric positive definite."""
    n = D.shape[-1]
    A = D
    B = jnp.broadcast_to(jnp.eye(n, dtype=D.dtype), D.shape)
    for k in range(n):
        piv = 1.0 / A[..., k, k]
        rowA = A[..., k, :] * piv[..., None]
        rowB = B[..., k, :] * piv[..., None]
        col = A[..., :, k]
        e = (jnp.arange(n) == k).astype(D.dtype)
        f = col - e                                  # row k becomes the scaled row
        A = A - f[..., :, None] * rowA[..., None, :]
        B = B - f[..., :, None] * rowB[..., None, :]
    return B


def inv6_pivoted(D):
    """Inverse of (..., 6, 6) blocks by Gauss-Jordan with partial pivoting
    (unrolled; the row swaps as gathers, so it vectorises over variants;
    the permutation is in range by construction, so the gathers clip, which
    the generated backend translates).
    For blocks that need not be close to positive definite: the stiffness
    blocks of a static Newton step, whose diagonal entries in the Euler
    angle coordinates can be zero where the block is regular."""
    n = D.shape[-1]
    A = D
    B = jnp.broadcast_to(jnp.eye(n, dtype=D.dtype), D.shape)
    idx = jnp.arange(n)
    for k in range(n):
        p = k + jnp.argmax(jnp.abs(A[..., k:, k]), axis=-1)          # (...,) pivot row
        perm = jnp.where(idx == k, p[..., None], jnp.where(idx == p[..., None], k, idx))
        A = jnp.take_along_axis(A, perm[..., :, None], axis=-2, mode="clip")
        B = jnp.take_along_axis(B, perm[..., :, None], axis=-2, mode="clip")
        piv = 1.0 / A[..., k, k]
        rowA = A[..., k, :] * piv[..., None]
        rowB = B[..., k, :] * piv[..., None]
        col = A[..., :, k]
        e = (idx == k).astype(D.dtype)
        f = col - e
        A = A - f[..., :, None] * rowA[..., None, :]
        B = B - f[..., :, None] * rowB[..., None, :]
    return B


def factor(elim: Elimination, A, inverse=None):
    """Numeric block LU of A given as (pattern.n, 6, 6) slot blocks.

    Returns per superstep (L, U, Dinv): L_ik = A_ik D_k^-1 for the later rows
    i of its pivots k, U_kj = A_kj (after the earlier Schur updates) for the
    later columns j, and the inverted (Schur-updated) pivot blocks D_k^-1
    (``inverse``: how a pivot block is inverted, default :func:`inv6`)."""
    inverse = inv6 if inverse is None else inverse
    zero = jnp.zeros((1, 6, 6), A.dtype)
    a = jnp.concatenate([A[: elim.pattern.n], zero])[elim.gather]
    out = []
    for st in elim.steps:
        Di = inverse(a[st.diag])
        L = mm(a[st.low], Di[st.low_piv]) if len(st.low) else None
        U = a[st.up] if len(st.up) else None
        if len(st.upd_target):
            prod = mm(L[st.upd_l_local], U[st.upd_u_local])
            a = a.at[st.upd_slots].add(-st.upd_sum(prod))
        out.append((L, U, Di))
    return tuple(out)


def solve(elim: Elimination, fac, b):
    """Solve A x = b with the factors of :func:`factor`; b, x of shape (m, 6)."""
    y = b
    for st, (L, _, _) in zip(elim.steps, fac):            # forward: L y = b
        if len(st.low):
            y = y.at[st.low_rows].add(-st.low_sum(mv(L, y[st.low_col])))
    x = y
    for st, (_, U, Di) in zip(reversed(elim.steps), reversed(fac)):   # backward: D U x = y
        r = x[st.pivots]
        if len(st.up):
            r = r - st.up_sum(mv(U, x[st.up_col]))
        x = x.at[st.pivots].set(mv(Di, r))
    return x
