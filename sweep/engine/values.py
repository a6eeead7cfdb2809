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
enters the trace-cache key (:func:`sweep.tracecache.fingerprint`) instead
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


def rows(thetas, vector):
    """Parameter rows (C, P) with the values vector (V,) appended to each."""
    thetas = np.asarray(thetas, np.float64)
    if vector is None or np.size(vector) == 0:
        return thetas
    return np.concatenate([thetas, np.broadcast_to(np.asarray(vector, np.float64),
                                                   (len(thetas), np.size(vector)))], axis=1)


def parameter_structure(pset):
    """What of a parameter set a program depends on: each parameter's
    field, index and mode - not its name, nominal value or bounds."""
    return tuple((p.field, tuple(np.asarray(i).tolist() for i in p.index), p.mode) for p in pset.params)


__all__ = ["Lifted", "Slot", "rows", "parameter_structure"]
