"""Load cases from config: wheel-centre loads u(t) as an :class:`kernels.loads.Excitation`."""
import numpy as np

from kernels import loads
from kernels.model import ModelError

CHANNELS = ("fx", "fy", "fz", "mx", "my", "mz")
SIDES = ("left", "right")


def _loads(spec, what):
    u = np.zeros((2, 6))
    for key in spec or {}:
        if key not in SIDES:
            raise ModelError(f"{what}.{key}: unknown side (expected left or right)")
    for i, side in enumerate(SIDES):
        for ch, val in ((spec or {}).get(side) or {}).items():
            if ch not in CHANNELS:
                raise ModelError(f"{what}.{side}.{ch}: unknown load channel "
                                 f"(expected one of {CHANNELS})")
            if not np.isfinite(float(val)):
                raise ModelError(f"{what}.{side}.{ch} = {val!r} is not finite")
            u[i, CHANNELS.index(ch)] = float(val)
    return u


def build_excitation(cfg):
    """Return (excitation, t_start, t_end) of a load-case config."""
    what = "loadcase"
    t0, t1 = float(cfg["t_start"]), float(cfg["t_end"])
    if not t1 > t0:
        raise ModelError(f"{what}.t_end = {t1} must be greater than t_start = {t0}")
    base = _loads(cfg.get("wheel_loads"), f"{what}.wheel_loads")
    changes = []
    for i, ch in enumerate(cfg.get("changes") or []):
        w = f"{what}.changes[{i}]"
        dur = float(ch.get("duration", 0.0))
        if dur < 0:
            raise ModelError(f"{w}.duration = {dur} must be >= 0")
        amp = _loads({k: v for k, v in ch.items() if k in SIDES}, w)
        changes.append((float(ch["time"]), dur, amp))
    return loads.excitation(base, changes), t0, t1
