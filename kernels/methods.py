"""TEMPORARY SHIM in the refactor branch (replaced by the method-value work at merge)."""
from kernels import integrate
from kernels.integrate import RosenbrockTableau
from kernels.linear_implicit_euler import LINEAR_IMPLICIT_EULER
from kernels.lsrt2 import LSRT2
from kernels.ros34pw2 import ROS34PW2

RosenbrockTableau.jittable = True
RosenbrockTableau.options = ()
RosenbrockTableau.has_error_estimate = property(lambda self: self.b_hat is not None)
RosenbrockTableau.with_options = lambda self, **kw: self
RosenbrockTableau.simulate = lambda self, *a, **kw: integrate.simulate(self, *a, **kw)
REFERENCE = "radau"
METHODS = {m.name: m for m in (LSRT2, ROS34PW2, LINEAR_IMPLICIT_EULER)}
