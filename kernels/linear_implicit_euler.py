"""The linear-implicit Euler method (semi-implicit / modified implicit Euler of
real-time vehicle codes): one linearisation and one solve per step,

    (E - h J_v - h^2 J_r K) dv = q(r, v, u) + h J_u du + h J_r K v,
    dr = K v + h K dv,   r+ = r + h dr,  v+ = v + h dv

(method.md eqs. 6-9 with s = 1, g = 1, b = 1). Order 1, L-stable
(R(z) = 1 / (1 - z)): the cheap baseline, fully damped stiff modes, first
order error in the oscillation that the NMSE sees.
"""
from kernels.integrate import RosenbrockTableau

LINEAR_IMPLICIT_EULER = RosenbrockTableau(
    name="linear_implicit_euler", gamma=1.0, a=((0.0,),), g=((0.0,),), b=(1.0,), order=1)
