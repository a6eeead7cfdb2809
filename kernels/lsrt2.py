"""LSRT2: the 2-stage linear-implicit Rosenbrock method (method.md section 2).

Table 1 of method.md as a :class:`kernels.integrate.RosenbrockTableau`:
s = 2, b = (0, 1), a21 = c2 = 1/2, g11 = g22 = g = 1 - sqrt(2)/2,
g21 = -g. Both stages share the coefficient matrix of eq. (11), so one LU
factorisation per linearisation serves both; the input increment enters
stage 1 as ``h g J_u du/dt`` and cancels in stage 2 (gamma_2 = g + g21 = 0).
Order exactly 2; a W-method of order 2, so re-linearising every N steps
keeps order 2. Stability function R(z) = (1 + (sqrt2 - 1) z) / (1 - g z)^2,
L-stable.

:func:`step` and :func:`simulate` are the generic ones of
:mod:`kernels.integrate` bound to this method (kept for callers of the
single-method API).
"""
from kernels import integrate
from kernels.integrate import RosenbrockTableau, System, Trajectory  # noqa: F401 (re-exported)
from kernels.linsolve import dense_coefficient_matrix

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


def coefficient_matrix(lin, h):
    """A = E - h g J_v - (h g)^2 J_r K (eq. 11), dense, for LSRT2's g."""
    return dense_coefficient_matrix(lin, h * GAMMA)


def step(system: System, lin, lu, q1, r, v, t, h):
    """One LSRT2 step k -> k+1 (eqs. 6-9); ``lu = solver.factor(lin, h g)``,
    ``q1 = q(r, v, u(t))``. Returns (r+, v+)."""
    r_new, v_new, _ = integrate.step(LSRT2, system, lin, lu, q1, r, v, t, h)
    return r_new, v_new


def simulate(system: System, r0, v0, t0, h, n_samples, every=1, relinearise_every=1,
             output_fn=None):
    """:func:`kernels.integrate.simulate` with LSRT2."""
    return integrate.simulate(LSRT2, system, r0, v0, t0, h, n_samples, every,
                              relinearise_every, output_fn)
