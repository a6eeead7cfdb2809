"""A force element of a user's own, outside ``kernels/``: the torsion
spring-damper of ``tests/kernels/test_element_registry.py`` under a name of
its own, loaded by a model file's ``elements:`` list
(``"tests.sweep.user_elements:TORSION_SPRING"``;
:func:`sweep.axle.builder.load_element_groups`). Its model-file section is
``user_torsion_springs`` (bodies, at, axis, stiffness [N m/rad], damping
[N m s/rad]); sweep target ``user_torsion_spring.stiffness``."""
from kernels.forces import ElementGroup
from tests.kernels.test_element_registry import torsion_build, torsion_element, torsion_validate

TORSION_SPRING = ElementGroup("user_torsion_spring", "user_torsion_springs", torsion_element,
                              build=torsion_build, validate=torsion_validate, targets={"stiffness": ("k", None)})
NOT_A_GROUP = 42
# a group whose section would be the bushings' (refused when loaded)
CLASHING = ElementGroup("user_clashing", "bushings", torsion_element, build=torsion_build)
