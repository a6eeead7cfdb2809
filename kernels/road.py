"""A random road under the tyres: the ISO 8608 displacement spectrum, a
reproducible two-track profile as a sum of harmonics, and the wheel-centre
force it exerts through a point-contact tyre.

Road spectrum (ISO 8608:2016): the one-sided displacement PSD over the
spatial frequency n [cycles/m] is

    Gd(n) = Gd(n0) (n / n0)^-w,   n0 = 0.1 cycles/m, w = 2,

with Gd(n0) [m^3] set by the road class (:data:`CLASSES`: the class's
geometric mean). Driven at the speed V [m/s], the time frequency is f = V n
and the PSD over f is G(f) = Gd(f / V) / V [m^2/Hz].

Synthesis (sum of harmonics with random phases, e.g. Cebon, "Handbook of
vehicle-road interaction", 1999, sec. 3.3; the method of Rill's road model):
on the frequency grid f_k = k df (f_min <= f_k <= f_max) the left track is

    z_L(t) = sum_k a_k cos(2 pi f_k t + phi_k),   a_k = sqrt(2 G(f_k) df),

with phases phi_k uniform on [0, 2 pi) from the seed, so its mean square
is sum_k G(f_k) df and its PSD (at a resolution coarser than df) is G. The
right track is ``coherence`` c times the left one plus sqrt(1 - c^2) times
an independent track with the same spectrum: it has the same PSD and the
magnitude-squared coherence c^2 with the left track at every frequency
(c = 0: independent tracks, c = 1: the same track). Real tracks' coherence
falls with frequency; the constant is a stated simplification. The profile
is periodic in 1 / df: the run is at most that long.

Tyre (point contact): the tyre is a vertical spring
(rate k_t [N/m]) and damper (c_t [N s/m]) between the wheel centre and the
road point below it. Its force on the wheel is

    F = F_static + k_t (z_road - dz_wc) + c_t (dz_road/dt - dz_wc/dt),

so the road enters the wheel-centre force input as k_t z_road + c_t
dz_road/dt (:func:`wheel_force_harmonics`), and the terms in the wheel
motion are the tyre element of the model (a vertical bushing between the
ground and the wheel, ``tyre_left`` / ``tyre_right``). Lift-off and landing
are state events (:func:`kernels.system.switching_laws`): off the road the
tyre and the road's force on its wheel are switched off.
"""
from typing import NamedTuple

import numpy as np

N0 = 0.1                 # cycles/m, the reference spatial frequency of ISO 8608
WAVINESS = 2.0           # w of ISO 8608
#: ISO 8608 road classes: geometric mean of Gd(n0) [m^3] (class bounds: half and twice it)
CLASSES = {"A": 16e-6, "B": 64e-6, "C": 256e-6, "D": 1024e-6, "E": 4096e-6, "F": 16384e-6,
           "G": 65536e-6, "H": 262144e-6}


def displacement_psd(n, gd0, waviness=WAVINESS):
    """ISO 8608 one-sided displacement PSD Gd(n) [m^3] at spatial frequencies n [cycles/m] > 0."""
    return gd0 * (np.asarray(n, float) / N0) ** (-waviness)


def time_psd(f, gd0, speed, waviness=WAVINESS):
    """One-sided PSD of the road height under a wheel at ``speed`` [m/s] over
    time frequency f [Hz]: Gd(f / V) / V [m^2/Hz]."""
    return displacement_psd(np.asarray(f, float) / speed, gd0, waviness) / speed


class RoadProfile(NamedTuple):
    """Two tracks as harmonics: z_side(t) = sum_k cos[k, side] cos(omega_k t) + sin[k, side] sin(omega_k t)."""
    omega: np.ndarray    # (nh,) rad/s
    cos: np.ndarray      # (nh, 2) m, left / right
    sin: np.ndarray      # (nh, 2) m

    def height(self, t):
        """Road heights (len(t), 2) [m] at times t [s]."""
        wt = np.multiply.outer(np.asarray(t, float), self.omega)
        return np.cos(wt) @ self.cos + np.sin(wt) @ self.sin

    def rate(self, t):
        """dz/dt (len(t), 2) [m/s]."""
        wt = np.multiply.outer(np.asarray(t, float), self.omega)
        return np.cos(wt) @ (self.omega[:, None] * self.sin) - np.sin(wt) @ (self.omega[:, None] * self.cos)


def profile(gd0, speed, f_min, f_max, df, coherence=0.0, seed=0, waviness=WAVINESS) -> RoadProfile:
    """The two-track road of the module doc: harmonics on f_k = k df in
    [f_min, f_max] [Hz] at ``speed`` [m/s], phases from ``seed``
    (numpy's PCG64: the same road on every machine)."""
    if not (gd0 > 0 and speed > 0 and 0 < f_min < f_max and df > 0 and 0.0 <= coherence <= 1.0):
        raise ValueError(f"road: gd0 = {gd0}, speed = {speed}, frequencies [{f_min}, {f_max}] by {df}, "
                         f"coherence = {coherence}: need gd0, speed, df > 0, 0 < f_min < f_max, coherence in [0, 1]")
    k = np.arange(int(np.ceil(f_min / df - 1e-9)), int(np.floor(f_max / df + 1e-9)) + 1)
    f = k * df
    a = np.sqrt(2.0 * time_psd(f, gd0, speed, waviness) * df)
    rng = np.random.default_rng(seed)
    phi = rng.uniform(0.0, 2.0 * np.pi, size=(2, len(f)))
    left_c, left_s = a * np.cos(phi[0]), -a * np.sin(phi[0])
    ind_c, ind_s = a * np.cos(phi[1]), -a * np.sin(phi[1])
    g = float(coherence)
    h = np.sqrt(1.0 - g * g)
    cos = np.stack([left_c, g * left_c + h * ind_c], 1)
    sin = np.stack([left_s, g * left_s + h * ind_s], 1)
    return RoadProfile(2.0 * np.pi * f, cos, sin)


def wheel_force_harmonics(road: RoadProfile, rate, damping):
    """The road's part of the wheel-centre force through the tyre,
    k_t z + c_t dz/dt, as harmonics of u: (omega (nh,), cos (nh, 2, 6),
    sin (nh, 2, 6)) with only the vertical force column (fz) set [N];
    for :func:`kernels.loads.with_harmonics`."""
    nh = len(road.omega)
    w = road.omega[:, None]
    cos = np.zeros((nh, 2, 6))
    sin = np.zeros((nh, 2, 6))
    # k (C cos + S sin) + c w (S cos - C sin)
    cos[:, :, 2] = rate * road.cos + damping * w * road.sin
    sin[:, :, 2] = rate * road.sin - damping * w * road.cos
    return road.omega, cos, sin

