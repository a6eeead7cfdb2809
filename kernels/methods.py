"""The integration methods by name (``integrator=<name>`` of the sweep app).

Every entry is a :class:`kernels.integrate.Method` value: the fixed-step
linear-implicit methods (:class:`kernels.integrate.RosenbrockTableau`:
``lsrt2``, ``ros34pw2``, ``linear_implicit_euler``; ``jittable``, so they
run under ``jit`` / ``vmap`` / ``grad`` and a sweep maps them over a chunk
of variants) and the reference :data:`kernels.radau.RADAU` (``radau``;
``jittable`` is False: it runs eagerly on the host, one variant at a
time). Callers that compile a method tell the two apart by ``jittable``
(:data:`FIXED_STEP` lists the jittable names).

The user's tolerances: :func:`with_tolerances` returns the method with
them where the method takes tolerances itself (Radau's ``rtol``,
``atol_coordinates``, ``atol_speeds``: a new value by
``dataclasses.replace``); a fixed-step method takes none - its step is
``h`` - and an embedded one (``has_error_estimate``) turns them into the
``error_norm`` argument of ``simulate`` instead.
"""
import dataclasses
import importlib
from collections.abc import Mapping

from kernels.integrate import Method
from kernels.linear_implicit_euler import LINEAR_IMPLICIT_EULER
from kernels.lsrt2 import LSRT2
from kernels.ros34pw2 import ROS34PW2


class _Registry(Mapping):
    """Methods by name, in order; a ``lazy`` entry (name -> (module,
    attribute)) is imported on first access: the Radau reference brings
    scipy.integrate, 0.3 s of every job's start-up otherwise."""

    def __init__(self, methods, lazy):
        self._loaded = dict(methods)
        self._lazy = dict(lazy)
        self._names = (*self._loaded, *self._lazy)

    def __getitem__(self, name):
        if name not in self._loaded:
            if name not in self._lazy:
                raise KeyError(name)
            module, attr = self._lazy[name]
            self._loaded[name] = getattr(importlib.import_module(module), attr)
        return self._loaded[name]

    def __contains__(self, name):
        return name in self._names            # without importing a lazy entry

    def __iter__(self):
        return iter(self._names)

    def __len__(self):
        return len(self._names)


FIXED = (LSRT2, ROS34PW2, LINEAR_IMPLICIT_EULER)
METHODS: Mapping = _Registry({m.name: m for m in FIXED}, {"radau": ("kernels.radau", "RADAU")})
FIXED_STEP = tuple(m.name for m in FIXED if m.jittable)     # Radau runs on the host (not jittable)

TOLERANCES = ("rtol", "atol_coordinates", "atol_speeds")


def with_tolerances(method: Method, **tolerances) -> Method:
    """``method`` with the user's tolerances (keys of :data:`TOLERANCES`;
    None values are skipped) where it is a value with those fields (Radau);
    a method without them is returned unchanged."""
    unknown = set(tolerances) - set(TOLERANCES)
    if unknown:
        raise ValueError(f"unknown tolerance(s) {sorted(unknown)}; known: {', '.join(TOLERANCES)}")
    if not dataclasses.is_dataclass(method):
        return method
    fields = {f.name for f in dataclasses.fields(method)}
    given = {k: float(v) for k, v in tolerances.items() if v is not None and k in fields}
    return dataclasses.replace(method, **given) if given else method

# the reference every other method's cube is compared with (NMSE summary of a job)
REFERENCE = "radau"
