"""The integration methods by name (``integrator=<name>`` of the sweep app)."""
from kernels.linear_implicit_euler import LINEAR_IMPLICIT_EULER
from kernels.lsrt2 import LSRT2
from kernels.ros34pw2 import ROS34PW2

METHODS = {m.name: m for m in (LSRT2, ROS34PW2, LINEAR_IMPLICIT_EULER)}
