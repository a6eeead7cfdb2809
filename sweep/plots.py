"""Overview plot of a result cube (PNG beside the cube)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402


def overview(ds, path, n_samples=5):
    """Envelope and sample variants of the longitudinal wheel-centre displacement
    and reference-bushing force (left side), and the distribution of their peaks."""
    t = ds.time.values
    ok = ds.status.values == 0
    x = ds.wheel_centre_displacement.sel(side="left", axis="x").values[ok] * 1e3
    ref = ds.attrs["reference_bushing_left"]
    f = ds.bushing_force.sel(bushing=ref, component="fx").values[ok] / 1e3
    fig, ax = plt.subplots(2, 2, figsize=(12, 7), constrained_layout=True)
    pick = np.linspace(0, max(0, len(x) - 1), min(n_samples, len(x))).astype(int)
    for a, y, label in ((ax[0, 0], x, "wheel-centre x displacement [mm]"),
                        (ax[0, 1], f, f"{ref} fx [kN]")):
        if len(y):
            a.fill_between(t, np.nanmin(y, 0), np.nanmax(y, 0), color="0.85", label="envelope")
            for i in pick:
                a.plot(t, y[i], lw=0.8, label=f"variant {int(ds.variant.values[ok][i])}")
        a.set_xlabel("time [s]")
        a.set_ylabel(label)
        a.legend(fontsize=7)
    for a, y, label in ((ax[1, 0], x, "peak |x displacement| [mm]"), (ax[1, 1], f, "peak |fx| [kN]")):
        if len(y):
            a.hist(np.nanmax(np.abs(y), 1), bins=min(40, max(5, len(y) // 5)))
        a.set_xlabel(label)
        a.set_ylabel("variants")
    fig.suptitle(f"{ds.attrs.get('model', '')}: {int(ok.sum())} of {len(ok)} variants ok")
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path
