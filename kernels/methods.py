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

from kernels.integrate import Method
from kernels.linear_implicit_euler import LINEAR_IMPLICIT_EULER
from kernels.lsrt2 import LSRT2
from kernels.radau import RADAU
from kernels.ros34pw2 import ROS34PW2

METHODS: dict = {m.name: m for m in (LSRT2, ROS34PW2, LINEAR_IMPLICIT_EULER, RADAU)}
FIXED_STEP = tuple(name for name, m in METHODS.items() if m.jittable)

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
REFERENCE = RADAU.name
