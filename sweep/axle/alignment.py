"""Static alignment of an axle model (the service behind ``python -m
sweep.align``, :mod:`sweep.align`): Newton on the adjustments (tie-rod
length, camber shim, spring seat offset) that give the design toe, camber
and wheel load at the design position, and the pretension of an axle whose
springs are bushings. Also used per variant by a hardpoint sweep that
re-aligns each variant (``alignment: realign`` on a hardpoint parameter,
:func:`realigned`)."""
from __future__ import annotations

import copy

import jax
import numpy as np

import kernels  # noqa: F401  (float64)
from kernels import kc, metrics
from kernels.model import ModelError, build_model
from sweep.axle.builder import build_tables, check_alignment
from sweep.core.config import ConfigError

DEG = 180.0 / np.pi


@jax.jit
def _design_state(model):
    eq = kc.design_position(model)
    toe, camber = metrics.toe_camber(model, eq.r)
    return eq.fz, toe * DEG, camber * DEG, eq.converged


def design_alignment(cfg):
    """(wheel load [N], toe [deg], camber [deg]) per side (2,) at the design
    position of the model config ``cfg`` (a plain dict)."""
    model = build_model(build_tables(cfg))
    fz, toe, camber, ok = _design_state(model)
    if not bool(ok):
        from sweep.axle import diagnose
        found = diagnose.unrestrained(model)
        why = ("; held by no element at the design geometry: " + "; ".join(diagnose.explain_unrestrained(found))
               + " (give the elements there a rate in those directions)") if found else ""
        raise ModelError("the design position did not converge" + why)
    return np.asarray(fz), np.asarray(toe), np.asarray(camber)


# an alignment adjustment beyond these is not a shim but a sign of a wrong
# model (a rate in N/mm where N/m is meant, a spring far too soft)
MAX_SHIM = 0.02            # m: tie-rod length / camber shim change


def design_length(cfg, p2p_name):
    """Length [m] of the left per-side P2P element ``p2p_name`` at the design geometry."""
    tables = build_tables(cfg)
    pos = {mk["index"]: np.asarray(mk["position"], float) for mk in tables["markers"]}
    row = next(r for r in tables["p2p"] if r["name"] in (p2p_name + "_left", p2p_name))
    return float(np.linalg.norm(pos[row["marker_2"]] - pos[row["marker_1"]]))


def check_proposal(cfg, x):
    """Refuse an alignment whose adjustments are absurd: a spring seat offset
    longer than the spring itself (the spring cannot carry the design wheel
    load at a plausible preload) or a toe / camber shim beyond
    :data:`MAX_SHIM`; the message names the element, the value and the
    likely cause."""
    a = _spec(cfg)
    for (_, key), value in zip(_unknowns(a), x):
        name = a[key]
        if key == "seat_offset_of":
            length = design_length(cfg, name)
            if abs(value) > length:
                k = (cfg["per_side"]["p2p"][name].get("stiffness"))
                rate = f" (stiffness {k} N/m)" if k is not None else ""
                raise ModelError(
                    f"model.per_side.p2p.{name}: the alignment needs a seat offset of {value:.3f} m to carry the "
                    f"design wheel load of {a['wheel_load']} N, longer than the spring itself ({length:.3f} m at "
                    f"the design geometry): the spring{rate} is far too soft for the load - a rate in N/mm "
                    "where N/m is meant, or the wrong spring?")
        elif abs(value) > MAX_SHIM:
            raise ModelError(
                f"model.per_side.bushings.{name}.adjust.distance: the alignment needs {value * 1000:.1f} mm "
                f"to reach the {key[:-3]} target, more than a shim ({MAX_SHIM * 1000:.0f} mm): check the "
                f"alignment targets (deg) and the {key[:-3]} adjustment's direction")


def _spec(cfg):
    """The alignment section; toe and camber adjustments are optional (an
    axle without them - a twist beam, a rigid axle - aligns its ride height
    only: ``wheel_load`` and ``seat_offset_of``)."""
    a = cfg.get("alignment")
    if not a:
        raise ConfigError("model.alignment: the model states no alignment targets")
    need = ["wheel_load", "seat_offset_of"]
    if "toe_by" in a or "camber_by" in a or "toe_deg" in a or "camber_deg" in a:
        need = ["toe_deg", "camber_deg", "toe_by", "camber_by"] + need
    for key in need:
        if key not in a:
            raise ConfigError(f"model.alignment.{key}: missing")
    check_alignment(cfg)
    return a


def _unknowns(a):
    """The adjusted quantities: (residual index, key) of toe, camber, seat offset."""
    return ([(0, "toe_by"), (1, "camber_by")] if "toe_by" in a else []) + [(2, "seat_offset_of")]


def get_adjustments(cfg):
    a = _spec(cfg)
    ps = cfg["per_side"]
    out = []
    for _, key in _unknowns(a):
        if key == "seat_offset_of":
            out.append(float(ps["p2p"][a[key]].get("seat_offset") or 0.0))
        else:
            out.append(float(ps["bushings"][a[key]]["adjust"]["distance"]))
    return np.array(out)


def with_adjustments(cfg, x):
    a = _spec(cfg)
    out = copy.deepcopy(cfg)
    ps = out["per_side"]
    for (_, key), value in zip(_unknowns(a), x):
        if key == "seat_offset_of":
            ps["p2p"][a[key]]["seat_offset"] = float(value)
        else:
            ps["bushings"][a[key]]["adjust"]["distance"] = float(value)
    return out


def alignment_residual(cfg):
    """(toe - target [deg], camber - target [deg], wheel load - target [N]) of
    the left side; only the wheel load where the axle has no toe / camber
    adjustment."""
    a = _spec(cfg)
    fz, toe, camber = design_alignment(cfg)
    if "toe_by" not in a:
        return np.array([fz[0] - a["wheel_load"]])
    return np.array([toe[0] - a["toe_deg"], camber[0] - a["camber_deg"], fz[0] - a["wheel_load"]])


def align(cfg, tol=(1e-4, 1e-4, 0.1), max_iter=8, log=print):
    """Newton on (tie-rod length, camber shim, seat offset) [m] (the seat
    offset alone without toe / camber adjustments); returns x and the residual."""
    idx = [i for i, _ in _unknowns(_spec(cfg))]
    tol = np.asarray(tol)[idx]
    x = get_adjustments(cfg)
    scale = np.array([1.0, 1.0, 1000.0])[idx]        # deg, deg, kN: a balanced residual
    res = alignment_residual(with_adjustments(cfg, x))
    names = np.array(["toe", "camber", "wheel load"])[idx]
    units = np.array(["deg", "deg", "N"])[idx]
    for it in range(max_iter):
        log(f"  iteration {it}: " + ", ".join(f"{n} {r:+.5f} {u}" for n, r, u in zip(names, res, units))
            + f" off target at x = {np.round(x * 1000, 4).tolist()} mm")
        if np.all(np.abs(res) <= tol):
            break
        n = len(idx)
        J = np.zeros((n, n))
        h = 1e-4
        for j in range(n):
            xp = x.copy()
            xp[j] += h
            J[:, j] = (alignment_residual(with_adjustments(cfg, xp)) - res) / h / scale
        x = x - np.linalg.solve(J, res / scale)
        res = alignment_residual(with_adjustments(cfg, x))
    return x, res


def _pretension_spec(cfg):
    a = cfg.get("alignment") or {}
    if "pretension" not in a or "wheel_load" not in a:
        raise ConfigError("model.alignment: `pretension` needs `wheel_load` [N] beside it")
    check_alignment(cfg)
    return a


def with_preloads(cfg, values):
    """``cfg`` with the per-side bushings' ``preload`` lists set from
    ``values`` {bushing: [6 numbers]} (left side)."""
    out = copy.deepcopy(cfg)
    for name, row in values.items():
        out["per_side"]["bushings"][name]["preload"] = [float(v) for v in row]
    return out


def pretension(cfg, tol=1e-6):
    """The preloads {bushing: [x, y, z, rx, ry, rz]} (left side; the
    directions not listed under ``alignment.pretension`` keep their given
    value) that make the design geometry the static equilibrium under the
    design wheel load, and the largest generalised-force residual left [N,
    N m] (0 to round-off where the listed directions balance the axle)."""
    from kernels.dynamics import generalised_forces
    from kernels.names import DIRECTIONS, SIDES
    from sweep.axle.builder import MIRROR_LOCAL
    a = _pretension_spec(cfg)
    given = cfg["per_side"]["bushings"]
    base = {}
    for name, dirs in a["pretension"].items():
        row = np.asarray(given[name].get("preload", [0.0] * 6), float).copy()
        row[[DIRECTIONS.index(d) for d in dirs]] = 0.0
        base[name] = row
    cfg0 = with_preloads(cfg, base)
    tables = build_tables(cfg0)
    model = build_model(tables)
    names = [b["name"] for b in tables["bushings"]]
    unknowns = [(name, d) for name, dirs in a["pretension"].items() for d in dirs]
    rows, cols, signs = [], [], []
    for side in SIDES:
        flip = MIRROR_LOCAL if side == "right" else np.ones(6)
        for name, d in unknowns:
            rows.append(names.index(f"{name}_{side}"))
            cols.append(DIRECTIONS.index(d))
            signs.append(flip[DIRECTIONS.index(d)])
    rows, cols, signs = map(np.asarray, (rows, cols, signs))
    n = len(unknowns)
    u = np.zeros((2, 6))
    u[:, 2] = float(a["wheel_load"])
    r = model.r_design

    def residual(p):
        pre = model.elements["bushing"]["preload"].at[rows, cols].add(signs * jax.numpy.concatenate([p, p]))
        m = model.replace_elements(bushing={"preload": pre})
        return generalised_forces(m, r, jax.numpy.zeros_like(r), u).reshape(-1)

    p0 = np.zeros(n)
    q0 = np.asarray(residual(p0))
    A = np.asarray(jax.jacfwd(residual)(p0))
    p, *_ = np.linalg.lstsq(A, -q0, rcond=None)
    res = np.abs(np.asarray(residual(p)))
    if res.max() > tol * max(1.0, float(a["wheel_load"])):
        body, k = divmod(int(res.argmax()), 6)
        raise ModelError(f"model.alignment.pretension: the listed preload directions cannot hold the design "
                         f"geometry under {a['wheel_load']} N: {res.max():.4g} N (or N m) left on body "
                         f"{tables['bodies'][body]['name']!r}, direction {DIRECTIONS[k]}")
    out = {name: base[name].copy() for name in a["pretension"]}
    for (name, d), val in zip(unknowns, p):
        out[name][DIRECTIONS.index(d)] = val
    return out, float(res.max())


def realigned(cfg, tol=(1e-8, 1e-8, 1e-5)):
    """``cfg`` (a plain model config) with its static alignment solved
    again: the adjustments of ``alignment`` (toe, camber, seat offset) or,
    for an axle aligned by ``alignment.pretension``, its preloads. Returns
    (config, None) or (None, the reason) where the alignment fails (does not
    converge, or proposes an absurd adjustment: :func:`check_proposal`)."""
    a = cfg.get("alignment") or {}
    try:
        if "pretension" in a:
            values, _ = pretension(cfg)
            return with_preloads(cfg, values), None
        # tight (2-3 Newton steps): a hardpoint gradient differentiates the
        # re-aligned build by finite differences of 1e-4 m (sweep.engine.values)
        x, res = align(cfg, tol=tol, max_iter=12, log=lambda s: None)
        idx = [i for i, _ in _unknowns(_spec(cfg))]
        if not np.all(np.abs(res) <= np.asarray(tol)[idx]):
            return None, f"the alignment did not converge (residual {np.round(res, 6).tolist()})"
        check_proposal(cfg, x)
        return with_adjustments(cfg, x), None
    except ModelError as err:      # ConfigError is a ModelError
        return None, str(err)


def variant_config(cfg, pset, theta):
    """(model config, hardpoint offsets, None) of one variant of a design
    with hardpoint parameters (``cfg`` a plain model config, ``pset`` the
    :class:`sweep.axle.params.ParameterSet`, ``theta`` the variant's row): where a
    hardpoint parameter says ``alignment: realign`` the moved points are
    written into the config and its static alignment solved again (offsets
    then ``()``); else the config as it is and the variant's offsets. (None,
    None, the reason) where the re-alignment fails - the variant is flagged,
    the batch runs on."""
    from sweep.axle.builder import moved_hardpoints
    offsets = pset.hardpoint_offsets(theta)
    if not pset.realign:
        return cfg, offsets, None
    moved = copy.deepcopy(cfg)
    moved["hardpoints"] = moved_hardpoints(cfg.get("hardpoints") or {}, offsets)["left"]
    out, why = realigned(moved)
    return (out, (), None) if out is not None else (None, None, why)


def check_realign(cfg):
    """A config a re-aligning hardpoint design can use: it states alignment
    targets (``model.alignment``); one-line :class:`ConfigError` otherwise."""
    a = cfg.get("alignment") or {}
    if "pretension" in a:
        _pretension_spec(cfg)
    else:
        _spec(cfg)
