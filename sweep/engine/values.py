"""Values as run-time inputs: a compiled chunk runner is keyed on structure.

A job's per-variant function depends on the model (masses, inertias,
hardpoints, element characteristics) and on the load case (wheel loads,
switch times, K&C amplitudes). Closed over, those numbers are folded into
the compiled program as constants, so a changed wheel load or bushing rate
is a new program (a compile of tens of seconds). :class:`Lifted` takes them
out: every floating-point leaf of the inputs' pytree becomes a slot of one
float64 vector, passed at run time; what stays in the program is the
*structure* - the pytree's shape (bodies, element kinds and connectivity,
curve table sizes, the number of load pieces), the integer leaves (index
tables, discrete states), the model's topology (:meth:`kernels.model.Topology.structure`)
and the table sections read while tracing. :meth:`Lifted.structure` is what
enters the trace-cache key (:func:`sweep.core.tracecache.fingerprint`) instead
of the values, so a rerun with changed numbers finds the traced and
compiled program of the last run.

The engine appends the vector to every variant's parameter row
(:func:`rows`): a per-variant function reads ``row = [theta | values]``
and rebuilds its model with :meth:`Lifted.split`. One vector per variant
costs a few kB per variant (the outputs are MBs), and it is the route by
which per-variant values (e.g. moved hardpoints) reach the same program.
"""
from __future__ import annotations

import dataclasses

import jax
import numpy as np


@dataclasses.dataclass(frozen=True)
class Slot:
    """A lifted leaf in the structure: its shape and dtype, never its value."""
    shape: tuple
    dtype: str
    python_float: bool


def _is_value(leaf):
    if isinstance(leaf, bool):
        return False
    if isinstance(leaf, (float, np.floating)):
        return True
    if isinstance(leaf, (np.ndarray, jax.Array)):
        return np.dtype(leaf.dtype).kind == "f"
    return False


class Lifted:
    """The floating-point leaves of ``tree`` as one run-time vector.

    ``vector`` (V,) float64: the values; :meth:`rebuild` (traceable) turns a
    vector back into the tree; :meth:`split` a parameter row ``[theta |
    values]``; :meth:`structure` the key of what stays compiled in."""

    def __init__(self, tree):
        leaves, self.treedef = jax.tree_util.tree_flatten(tree)
        self.slots, self.consts, parts, off = [], [], [], 0
        for leaf in leaves:
            if _is_value(leaf):
                a = np.asarray(leaf)
                self.slots.append((off, a.shape, a.dtype, isinstance(leaf, (float, np.floating))
                                   and not isinstance(leaf, np.ndarray)))
                parts.append(a.astype(np.float64).ravel())
                off += a.size
            else:
                self.slots.append(None)
                self.consts.append(leaf)
        self.size = off
        self.vector = np.concatenate(parts) if parts else np.zeros(0)
        self.tree = tree

    def rebuild(self, vec):
        """The tree with its values read from ``vec`` (V,) (traced or concrete)."""
        consts = iter(self.consts)
        leaves = []
        for slot in self.slots:
            if slot is None:
                leaves.append(next(consts))
                continue
            off, shape, dtype, scalar = slot
            n = int(np.prod(shape, dtype=np.int64))
            a = vec[off:off + n].reshape(shape).astype(dtype)
            leaves.append(a.reshape(()) if scalar else a)
        return jax.tree_util.tree_unflatten(self.treedef, leaves)

    def split(self, row, n_params):
        """``row = [theta | values]`` -> (theta, tree)."""
        return row[:n_params], self.rebuild(row[n_params:])

    def structure(self):
        """What a program built from the rebuilt tree depends on besides the
        vector: the tree with every value replaced by its :class:`Slot`
        (topologies by their structure key), for the trace-cache key."""
        consts = iter(self.consts)
        leaves = [next(consts) if s is None else Slot(tuple(s[1]), str(np.dtype(s[2])), s[3])
                  for s in self.slots]
        skeleton = jax.tree_util.tree_unflatten(self.treedef, leaves)
        return _keyable(skeleton)


def _keyable(x):
    """The skeleton with every :class:`kernels.model.Topology` replaced by
    its structure (its informational value tables stay out of the key)."""
    from kernels.model import Topology
    if isinstance(x, Topology):
        return ("topology", x.structure())
    if dataclasses.is_dataclass(x) and not isinstance(x, type) and not isinstance(x, Slot):
        return (type(x).__qualname__, tuple((f.name, _keyable(getattr(x, f.name)))
                                            for f in dataclasses.fields(x)))
    if isinstance(x, dict):
        return ("dict", tuple((k, _keyable(v)) for k, v in sorted(x.items(), key=lambda kv: repr(kv[0]))))
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, tuple(_keyable(e) for e in x))
    return x


def rows(thetas, vector, pair=False):
    """Parameter rows (C, P) with the values appended to each: a vector (V,)
    shared by every variant, or a :class:`PerVariant` giving each row its own.
    ``pair``: a shared vector's runner takes ``(thetas, vector)`` instead
    (:func:`sweep.engine.mapping.map_variants`, ``shared``: the values once,
    not repeated per row)."""
    thetas = np.asarray(thetas, np.float64)
    if pair:
        return thetas, np.asarray(vector, np.float64)
    if callable(vector):
        return np.concatenate([thetas, vector(thetas)], axis=1)
    if vector is None or np.size(vector) == 0:
        return thetas
    return np.concatenate([thetas, np.broadcast_to(np.asarray(vector, np.float64),
                                                   (len(thetas), np.size(vector)))], axis=1)


class PerVariant:
    """Each variant's own values: for a design that moves hardpoints, the
    model is rebuilt per variant on the host (:func:`sweep.axle.builder.build_tables`
    with the variant's offsets, ~30 ms for a full axle) and its values
    lifted like the nominal model's (``tree_of(model)``: the tree the
    runner lifts, e.g. (model, excitation)). Every variant's tree must have
    the nominal's structure (checked: a moved point must not change what is
    compiled in, e.g. an index table). Rows repeated in a chunk (padding)
    are built once. :meth:`prefetch` builds the next chunk's rows in a
    background thread while the current chunk computes (XLA releases the
    GIL), so the builds leave the job's critical path."""

    def __init__(self, model_cfg, pset, tree_of, template: Lifted):
        from sweep.axle.builder import _plain
        self.cfg = _plain(model_cfg)
        self.pset, self.tree_of, self.template = pset, tree_of, template
        if pset.realign:
            from sweep.axle.alignment import check_realign
            check_realign(self.cfg)
        self._memo = {}
        self._pending = None
        self._pool = None

    def row(self, theta):
        from sweep.axle.alignment import variant_config
        from sweep.axle.builder import model_from_config
        offsets = self.pset.hardpoint_offsets(theta)
        key = tuple((n, s, tuple(d)) for n, s, d in offsets)
        if key not in self._memo:
            cfg, offsets, why = variant_config(self.cfg, self.pset, theta)
            if cfg is None:            # the re-alignment failed: NaN values, the variant fails, the job runs on
                import logging
                logging.getLogger("sweep").warning(
                    f"warning: hardpoint variant {dict(zip(self.pset.names, np.round(theta, 6).tolist()))}: "
                    f"re-alignment failed ({why}); the variant is flagged")
                self._memo[key] = np.full(self.template.size, np.nan)
                return self._memo[key]
            lift = Lifted(self.tree_of(model_from_config(cfg, hardpoint_offsets=offsets)))
            t = self.template
            same = (lift.treedef == t.treedef and lift.size == t.size
                    and [s and s[:3] for s in lift.slots] == [s and s[:3] for s in t.slots]
                    and all(_same(a, b) for a, b in zip(lift.consts, t.consts)))
            if not same:
                names = ", ".join(p.name for _, p in self.pset.hardpoints)
                from sweep.core.config import ConfigError
                raise ConfigError(f"sweep.parameters ({names}): the moved hardpoints change the model's "
                                  "structure (an index table or discrete state), not only its values")
            if len(self._memo) > 8192:
                self._memo.clear()
            self._memo[key] = lift.vector
        return self._memo[key]

    def prefetch(self, thetas):
        """Start building the rows of ``thetas`` (the next chunk) in the background."""
        import concurrent.futures
        self._wait()
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="variant-models")
        rows = np.array(thetas, np.float64)
        self._pending = self._pool.submit(lambda: [self.row(t) for t in rows])

    def _wait(self):
        if self._pending is not None:
            p, self._pending = self._pending, None
            p.result()

    def probe_thetas(self):
        """Parameter vectors (K, P) that bracket the design's geometry: the
        nominal, each hardpoint parameter alone at its lower and upper bound,
        and all of them at their lower and at their upper bounds together
        (the other parameters nominal) - the variants whose values a
        generated build of the design folds its constants from
        (:func:`sweep.codegen.emit.rows_pattern`)."""
        nominal = self.pset.nominal
        thetas = [nominal]
        lo, hi = nominal.copy(), nominal.copy()
        for i, p in self.pset.hardpoints:
            for bound in (p.lower, p.upper):
                t = nominal.copy()
                t[i] = bound
                thetas.append(t)
            lo[i], hi[i] = p.lower, p.upper
        return np.array(thetas + [lo, hi], np.float64)

    def __call__(self, thetas):
        self._wait()
        return np.stack([self.row(t) for t in np.asarray(thetas, np.float64)])


# central-difference step of the geometry derivative [m] and its stencil
# (fourth order: truncation ~ h^4 |f^(5)| ~ 1e-16 relative for geometry of
# metre size, rounding ~ eps |f| / h ~ 1e-12)
GEOMETRY_STEP = 1e-4
_STENCIL = ((-2.0, 1.0 / 12.0), (-1.0, -8.0 / 12.0), (1.0, 8.0 / 12.0), (2.0, -1.0 / 12.0))


def differentiable_values(per_variant: PerVariant, n_params: int):
    """``values(theta)``: the model's lifted vector (V,) as a JAX function of
    the parameter vector theta (n_params,), differentiable with respect to
    its hardpoint columns - what makes hardpoints tuning variables.

    The model build that moves a hardpoint (body frames, rod inertias,
    marker and element frames, reference lengths, design position) is host
    code, a closed-form function of the points; it is reached through
    ``jax.pure_callback`` and given a ``jax.custom_jvp`` whose tangent is
    ``dV/dtheta @ dtheta`` with dV/dtheta from fourth-order central
    differences of the build (4 builds per hardpoint column,
    :data:`GEOMETRY_STEP`). Everything downstream of the values (statics,
    K&C, the time response) is differentiated exactly by JAX, so a gradient
    with respect to hardpoint offsets and element rates comes in one pass;
    the non-hardpoint columns' entries of dV/dtheta are 0 (those parameters
    act on the model through :meth:`sweep.axle.params.ParameterSet.apply`).
    jit-, vmap- (sequential callbacks) and grad-safe; not exportable (a host
    callback), so a program using it is never trace-cached."""
    import jax.numpy as jnp
    cols = [i for i, _ in per_variant.pset.hardpoints]
    size = per_variant.template.size

    def host_values(theta):
        return np.asarray(per_variant.row(np.asarray(theta, np.float64)), np.float64)

    def host_jacobian(theta):
        theta = np.asarray(theta, np.float64)
        jac = np.zeros((size, n_params))
        for i in cols:
            for k, w in _STENCIL:
                t = theta.copy()
                t[i] += k * GEOMETRY_STEP
                jac[:, i] += w * per_variant.row(t)
            jac[:, i] /= GEOMETRY_STEP
        return jac

    out_v = jax.ShapeDtypeStruct((size,), jnp.float64)
    out_j = jax.ShapeDtypeStruct((size, n_params), jnp.float64)

    @jax.custom_jvp
    def values(theta):
        return jax.pure_callback(host_values, out_v, theta, vmap_method="sequential")

    @values.defjvp
    def _values_jvp(primals, tangents):
        (theta,), (dtheta,) = primals, tangents
        jac = jax.pure_callback(host_jacobian, out_j, theta, vmap_method="sequential")
        return values(theta), jac @ dtheta

    return values


def _same(a, b):
    if isinstance(a, (np.ndarray, jax.Array)) or isinstance(b, (np.ndarray, jax.Array)):
        a, b = np.asarray(a), np.asarray(b)
        return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)
    return type(a) is type(b) and a == b


def run_values(plan, tree_of):
    """(values, structure) of a job's runner: the nominal tree's vector (or,
    for a design with hardpoint parameters, a :class:`PerVariant` builder)
    and the structure that enters the trace-cache key."""
    template = Lifted(tree_of(plan.model))
    structure = (template.structure(), parameter_structure(plan.pset))
    if plan.pset.hardpoints:
        if plan.model_cfg is None:
            raise ValueError("a plan with hardpoint parameters needs its model config (Plan.model_cfg)")
        return PerVariant(plan.model_cfg, plan.pset, tree_of, template), structure, template.size
    return template.vector, structure, template.size


def parameter_structure(pset):
    """What of a parameter set a program depends on: each parameter's
    field, index and mode - not its name, nominal value or bounds."""
    return tuple((p.field, tuple(np.asarray(i).tolist() for i in p.index), p.mode) for p in pset.params)


def example(chunk, n_params, size, pair=False):
    """A runner's example argument: rows (chunk, P + V), or the pair
    ``(thetas (chunk, P), values (V,))`` of a runner of shared values."""
    if pair:
        return np.zeros((chunk, n_params)), np.zeros(size)
    return np.zeros((chunk, n_params + size))


__all__ = ["Lifted", "Slot", "PerVariant", "differentiable_values", "rows", "run_values", "parameter_structure",
           "example"]
