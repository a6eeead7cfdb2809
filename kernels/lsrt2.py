"""LSRT2: the 2-stage linear-implicit Rosenbrock method (method.md section 2).

Table 1 of method.md as a :class:`kernels.integrate.RosenbrockTableau`:
s = 2, b = (0, 1), a21 = c2 = 1/2, g11 = g22 = g = 1 - sqrt(2)/2,
g21 = -g. Both stages share the coefficient matrix of eq. (11), so one LU
factorisation per linearisation serves both; the input increment enters
stage 1 as ``h g J_u du/dt`` and cancels in stage 2 (gamma_2 = g + g21 = 0).
Order exactly 2; a W-method of order 2, so re-linearising every N steps
keeps order 2. Stability function R(z) = (1 + (sqrt2 - 1) z) / (1 - g z)^2,
L-stable.

A value behind :class:`kernels.integrate.Method`: ``LSRT2.simulate(system,
...)`` is the one time loop of :mod:`kernels.integrate` with these
coefficients (jittable, differentiable, checkpointable).
"""
from kernels.integrate import RosenbrockTableau

# Table 1 (s = 2)
GAMMA = 1.0 - 2.0 ** 0.5 / 2.0       # g11 = g22
G21 = -GAMMA
A21 = 0.5
C2 = 0.5
B1, B2 = 0.0, 1.0

LSRT2 = RosenbrockTableau(
    name="lsrt2", gamma=GAMMA,
    a=((0.0, 0.0), (A21, 0.0)),
    g=((0.0, 0.0), (G21, 0.0)),
    b=(B1, B2), b_hat=None, order=2)

