"""ROS34PW2 (Rang & Angermann, BIT 45 (2005) 761-787): a 4-stage Rosenbrock
W-method of order 3 with an embedded solution of order 2.

Stiffly accurate and L-stable (R(-inf) = 0); a W-method, so it keeps order
3 with an approximate Jacobian - in particular with the linearisation
reused for N steps (``relinearise_every``), checked by tests/kernels/test_methods.py.
The embedded solution gives a per-step error estimate, which the sweep
engine turns into the status "inaccurate" (values kept) when a variant's
largest estimate exceeds the configured tolerance: a fixed-step integrator
that tells when it is not accurate.

Coefficients in Hairer-Wanner's (alpha, gamma) form, as published; they are
checked against the order conditions in the tests.
"""
from kernels.integrate import RosenbrockTableau

GAMMA = 4.3586652150845900e-01

ROS34PW2 = RosenbrockTableau(
    name="ros34pw2", gamma=GAMMA,
    a=((0.0, 0.0, 0.0, 0.0),
       (8.7173304301691801e-01, 0.0, 0.0, 0.0),
       (8.4457060015369423e-01, -1.1299064236484185e-01, 0.0, 0.0),
       (0.0, 0.0, 1.0, 0.0)),
    g=((0.0, 0.0, 0.0, 0.0),
       (-8.7173304301691801e-01, 0.0, 0.0, 0.0),
       (-9.0338057013044082e-01, 5.4180672388095326e-02, 0.0, 0.0),
       (2.4212380706095346e-01, -1.2232505839045147e+00, 5.4526025533510214e-01, 0.0)),
    b=(2.4212380706095346e-01, -1.2232505839045147e+00, 1.5452602553351020e+00,
       4.3586652150845900e-01),
    b_hat=(3.7810903145819369e-01, -9.6042292212423178e-02, 5.0000000000000000e-01,
           2.1793326075422950e-01),
    order=3, embedded_order=2)
