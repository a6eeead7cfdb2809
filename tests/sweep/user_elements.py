"""A force element of a user's own, outside ``kernels/``: the torsion
spring-damper of ``tests/kernels/test_element_registry.py`` under a name of
its own, loaded by a model file's ``elements:`` list
(``"tests.sweep.user_elements:TORSION_SPRING"``;
:func:`sweep.axle.builder.load_element_groups`). Its model-file section is
``user_torsion_springs`` (bodies, at, axis, stiffness [N m/rad], damping
[N m s/rad]); sweep target ``user_torsion_spring.stiffness``; its torque
is the cube's ``user_torsion_spring_force``."""
from kernels.forces import ElementGroup
from tests.kernels.test_element_registry import torsion_build, torsion_element, torsion_output, torsion_validate

TORSION_SPRING = ElementGroup("user_torsion_spring", "user_torsion_springs", torsion_element,
                              build=torsion_build, validate=torsion_validate, targets={"stiffness": ("k", None)},
                              output=torsion_output,
                              numbers={"stiffness": "non_negative", "damping": "non_negative"})
NOT_A_GROUP = 42
# a group whose section would be the bushings' (refused when loaded)
CLASHING = ElementGroup("user_clashing", "bushings", torsion_element, build=torsion_build)


def torsion_row(spec, place):
    """A model-file vocabulary of the group's own: ``at`` and ``axis`` as a
    bushing's, a ``rate`` [N m/deg] given in degrees (stored as stiffness
    [N m/rad]) and a signed ``preload_torque`` [N m] of the left side, whose
    sign flips on the right (the mirror image)."""
    b1, b2 = place.bodies(spec)
    at = place.point(spec.get("at"), "at")
    R = place.frame(spec)
    rate = spec.get("rate")
    if not isinstance(rate, (int, float)) or isinstance(rate, bool) or rate < 0:
        raise ValueError(f"{place.what}.rate = {rate!r} must be a number >= 0 [N m/deg]")
    sign = -1.0 if place.side == "right" else 1.0
    return {"marker_1": place.marker("/1", b1, at, R), "marker_2": place.marker("/2", b2, at, R),
            "stiffness": float(rate) * 180.0 / 3.141592653589793,
            "preload_torque": sign * float(spec.get("preload_torque", 0.0))}


TORSION_BY_DEGREE = ElementGroup("user_torsion_by_degree", "user_torsion_by_degree", torsion_element,
                                 build=torsion_build, validate=torsion_validate, row=torsion_row,
                                 numbers={"rate": "non_negative", "preload_torque": "any"})
