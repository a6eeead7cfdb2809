"""Trace cache: a job's traced chunk runner, kept on disk as a serialized
``jax.export`` artifact (StableHLO) next to JAX's persistent compilation cache.

Why: the persistent compilation cache (``sweep.core.runtime.setup``) removes XLA's
compile on a second run, but JAX still *traces* the chunk runner (the model's
force elements, the static-equilibrium Newton loop, the Rosenbrock step and
the block solver: seconds of Python for a full axle; BENCHMARKS.md,
"Start-up of a rerun") before it can even look the compiled program up. With the trace cache a rerun
of the same job deserialises the exported program and hands it to ``jax.jit``;
as the first run compiles the *same* deserialised program, the compiled
executable is a hit in the persistent compilation cache.

The key (:func:`fingerprint`) is a SHA-256 over everything the runner closes
over (the model tables, the parameter set, the excitation, step size, sample
grid, method, chunk shape: the arguments of the runner factory, walked
recursively down to array bytes), the source of the ``kernels`` and ``sweep``
packages, the JAX/jaxlib versions and the backend. Anything it cannot hash
exactly (a function defined outside the two packages, a closure, say) makes
the key unique to this process, so an unsure key only costs a re-trace, never
a stale program; module-level functions of the packages enter by name (their
source is hashed). Off with
``cache.enabled=false`` (no directory) and for multi-device chunks (the
``shard_map`` runner is traced every time).
"""
from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import tempfile
import uuid

import jax
import numpy as np

log = logging.getLogger("sweep")
SUBDIR = "axle-traces"
_PACKAGES = ("kernels", "sweep")
_SOURCE_HASH = None


def _source_hash():
    """SHA-256 of the ``.py`` files of the kernels and sweep packages."""
    global _SOURCE_HASH
    if _SOURCE_HASH is None:
        h = hashlib.sha256()
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        for pkg in _PACKAGES:
            for dirpath, dirnames, files in os.walk(os.path.join(root, pkg)):
                dirnames.sort()
                for name in sorted(files):
                    if name.endswith(".py"):
                        path = os.path.join(dirpath, name)
                        h.update(os.path.relpath(path, root).encode())
                        with open(path, "rb") as f:
                            h.update(f.read())
        _SOURCE_HASH = h.hexdigest()
    return _SOURCE_HASH


def _feed(h, x, depth=0):
    if depth > 50:
        raise RecursionError("fingerprint: structure too deep")
    if x is None or isinstance(x, (bool, int, float, complex, str, bytes, np.generic)):
        h.update(f"{type(x).__name__}:{x!r};".encode())
    elif isinstance(x, (np.ndarray, jax.Array)):
        a = np.asarray(x)
        h.update(f"array:{a.dtype}:{a.shape};".encode())
        h.update(np.ascontiguousarray(a).tobytes())
    elif isinstance(x, dict):
        h.update(f"dict:{len(x)};".encode())
        for k in sorted(x, key=repr):
            _feed(h, k, depth + 1)
            _feed(h, x[k], depth + 1)
    elif isinstance(x, (list, tuple)):
        h.update(f"{type(x).__name__}:{len(x)};".encode())
        for e in x:
            _feed(h, e, depth + 1)
    elif dataclasses.is_dataclass(x) and not isinstance(x, type):
        h.update(f"dc:{type(x).__module__}.{type(x).__qualname__};".encode())
        for f in dataclasses.fields(x):
            h.update(f"{f.name}=".encode())
            _feed(h, getattr(x, f.name), depth + 1)
    elif hasattr(x, "__dict__") and not callable(x):
        h.update(f"obj:{type(x).__module__}.{type(x).__qualname__};".encode())
        _feed(h, vars(x), depth + 1)
    elif (callable(x) and getattr(x, "__module__", "").split(".")[0] in _PACKAGES
          and "<locals>" not in getattr(x, "__qualname__", "<locals>")):
        # a module-level function of the packages: its source is in the key already
        code = getattr(x, "__code__", None)
        h.update(f"fn:{x.__module__}.{x.__qualname__}:{getattr(code, 'co_firstlineno', '')};".encode())
    else:       # any other function or anything opaque: unique to this process (no reuse)
        h.update(f"opaque:{uuid.uuid4().hex};".encode())


def fingerprint(*parts) -> str:
    """Key of a traced runner: ``parts`` (the arguments of the runner factory,
    the chunk shape, a label) hashed exactly, plus the package source, the
    JAX/jaxlib versions, the backend and the float64 flag."""
    import jaxlib
    h = hashlib.sha256()
    h.update(f"{jax.__version__}/{jaxlib.__version__}/{jax.default_backend()}/"
             f"{jax.devices()[0].device_kind}/x64={jax.config.jax_enable_x64};".encode())
    h.update(_source_hash().encode())
    _feed(h, parts)
    return h.hexdigest()


def cache_path(key):
    """File of the traced runner ``key``, or None when the persistent
    compilation cache (and with it the trace cache) is off."""
    base = jax.config.jax_compilation_cache_dir
    if not base:
        return None
    return os.path.join(base, SUBDIR, key + ".jaxexport")


def traced(runner, example, key):
    """``(fn, loaded)``: ``fn`` is ``jax.jit`` of the exported ``runner`` for
    arguments shaped like ``example`` (a tuple of arrays), read from the trace
    cache when ``key`` is there (``loaded`` True), else traced, exported and
    stored. Falls back to ``(runner, False)`` when the cache is off, ``key`` is
    None or exporting fails (logged)."""
    path = cache_path(key) if key else None
    if path is None:
        return runner, False
    if os.path.exists(path):
        try:
            with open(path, "rb") as f:
                exp = jax.export.deserialize(bytearray(f.read()))
            return jax.jit(exp.call), True
        except Exception as err:  # noqa: BLE001 - a damaged entry is re-traced
            log.warning(f"warning: trace cache entry {path} unreadable ({err}); tracing again")
    try:
        specs = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype),
                                       tuple(example))
        blob = jax.export.export(runner)(*specs).serialize()
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)             # atomic: a killed run leaves no half entry
        # the first run compiles the same deserialised program as every rerun
        return jax.jit(jax.export.deserialize(blob).call), False
    except Exception as err:  # noqa: BLE001 - the plain runner still works
        log.warning(f"warning: trace cache off for this job ({type(err).__name__}: {err})")
        return runner, False


def memo(label, parts, compute):
    """``compute()``, kept in the trace cache beside the traced runners: a
    rerun with the same ``parts`` (hashed as by :func:`fingerprint`, with the
    package source) loads the pickled value instead of computing it. For
    the small start-up results that cost a trace or a slow import (a
    design's unit sample: scipy.stats; the output channels' shapes: a trace
    of the channel functions). Computed every time when the cache is off
    or ``parts`` hold something unsure (an opaque closure)."""
    import pickle
    key = fingerprint(label, parts)
    path = cache_path(key)
    if path is None:
        return compute()
    path = path[: -len(".jaxexport")] + ".pkl"
    try:
        with open(path, "rb") as f:
            return pickle.load(f)
    except FileNotFoundError:
        pass
    except Exception as err:  # noqa: BLE001 - a damaged entry is computed again
        log.warning(f"warning: trace cache entry {path} unreadable ({err}); computing it again")
    value = compute()
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            pickle.dump(value, f)
        os.replace(tmp, path)
    except OSError:                       # a read-only cache: the value is still right
        pass
    return value

