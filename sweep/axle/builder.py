"""Build the plain model tables of :mod:`kernels.model` from a model config.

The model config (``configs/model/*.yaml``) describes an axle the way a
chassis engineer does: named hardpoints of the left side, bodies with mass
and inertia, bushings at a hardpoint with an axis, P2P elements between two
hardpoints. Everything under ``per_side`` exists once per side: names get the
suffix ``_left`` / ``_right`` and the right side is the mirror image
(y -> -y). Elements under ``shared`` couple the sides and name bodies with
their suffix.

Point specs: a hardpoint name, ``[x, y, z]``, or
``{along: [A, B], fraction: t}`` / ``{along: [A, B], distance: d}`` (a point
on the line from A towards B); a hardpoint may itself be given as such a
spec (e.g. the joints of a leaf spring at fractions of its length). Axis
specs (``axis``, ``x_hint``): ``[x, y, z]`` or ``{along: [A, B]}``.

Static alignment (the way Adams/Car's "static alignment" adjusts an axle):
a bushing may carry ``adjust: {body: NAME, direction: AXIS, distance: d}``,
which moves the bushing's marker on that body by ``d`` [m] along the axis
spec before anything is solved - e.g. the tie-rod length (tie-rod-side
marker of the outer tie-rod joint along P -> Q: + = longer tie rod) or a
camber shim (carrier-side marker of the upper ball joint, laterally). The
markers then do not coincide at the design pose and the equilibrium takes
up the adjustment. ``python -m sweep.align`` finds the distances that give
the stated design toe / camber.

Added force-element groups (a model file's ``elements:``, or
``build_tables(..., groups=...)``; :class:`kernels.forces.ElementRegistry`): a
``per_side`` / ``shared`` section named after the group's ``table_key``
lists its elements, each with ``bodies: [A, B]`` and either ``at`` (both
markers at one point, axes from ``axis`` [default z] and ``x_hint``) or
``from`` / ``to`` (one marker at each point, vehicle-frame axes); every
other key is passed to the table row unchanged (the group's ``validate``
checks it).

Inertia specs: a 3x3 matrix, a diagonal ``[Ixx, Iyy, Izz]`` (body frame), or
``rods: [[A, B], ...]`` with ``radius`` (slender solid rods, mass split in
proportion to length; centre of mass and inertia computed from them).
"""
from __future__ import annotations

import math

import numpy as np

from kernels import forces
from kernels.model import STOP_LAWS, GROUND, ModelError
from kernels.names import BODY_GUIDE, DIRECTIONS, SIDES, SPRUNG_BODY, TYRE_BUSHINGS
from kernels.rotations import euler_to_matrix

MIRROR = np.diag([1.0, -1.0, 1.0])
# a per-side bushing's (x, y, z, rx, ry, rz) on the right side, from the left's
MIRROR_LOCAL = np.array([1.0, -1.0, 1.0, -1.0, 1.0, -1.0])


def _plain(cfg):
    """OmegaConf / nested mappings -> plain dicts and lists."""
    try:
        from omegaconf import DictConfig, ListConfig, OmegaConf
        if isinstance(cfg, (DictConfig, ListConfig)):
            return OmegaConf.to_container(cfg, resolve=True)
    except ImportError:  # pragma: no cover
        pass
    return cfg


class _Side:
    def __init__(self, hardpoints, side):
        self.hp = hardpoints
        self.side = side
        self.S = MIRROR if side == "right" else np.eye(3)
        self._resolving = set()

    def point(self, spec, what):
        if isinstance(spec, str):
            if spec not in self.hp:
                raise ModelError(f"{what} = {spec!r} is not a hardpoint "
                                 f"(known: {', '.join(sorted(self.hp))})")
            if isinstance(self.hp[spec], dict):     # a hardpoint given as a point spec
                if spec in self._resolving:
                    raise ModelError(f"model.hardpoints.{spec}: defined through itself")
                self._resolving.add(spec)
                try:
                    return self.point(self.hp[spec], f"model.hardpoints.{spec}")
                finally:
                    self._resolving.discard(spec)
            return self.S @ np.asarray(self.hp[spec], float)
        if isinstance(spec, dict) and "mirror" in spec:     # the mirror image (y -> -y) of a point
            return MIRROR @ self.point(spec["mirror"], what)
        if isinstance(spec, dict) and "along" in spec:
            a = self.point(spec["along"][0], what)
            b = self.point(spec["along"][1], what)
            if "fraction" in spec:
                return a + float(spec["fraction"]) * (b - a)
            if "distance" in spec:
                return a + float(spec["distance"]) * (b - a) / np.linalg.norm(b - a)
            raise ModelError(f"{what}: 'along' needs 'fraction' or 'distance'")
        arr = np.asarray(spec, float)
        if arr.shape != (3,):
            raise ModelError(f"{what} = {spec!r} is not a point")
        return self.S @ arr

    def x_hint(self, spec, what):
        """A bushing's ``x_hint`` (an axis spec; default x)."""
        return self.axis([1.0, 0.0, 0.0] if spec is None else spec, what)

    def axis(self, spec, what):
        if isinstance(spec, dict) and "along" in spec:
            d = self.point(spec["along"][1], what) - self.point(spec["along"][0], what)
        else:
            d = self.S @ np.asarray(spec, float)
        n = np.linalg.norm(d)
        if not np.isfinite(n) or n == 0:
            raise ModelError(f"{what} = {spec!r} is not a direction")
        return d / n


class Placement:
    """What an element group's model-file row function (``ElementGroup.row``,
    :func:`kernels.forces.bushing_row` etc.) uses for one element.

    name    the element's name (``<name>_<side>`` under ``per_side``)
    what    its model-file path (``model.<section>.<name>``), for errors
    side    "left" | "right" (an element under ``shared``: "left", the left
            side's hardpoints)
    shared  True for an element under ``shared`` (once, not per side)
    stop_law  the model's ``stop_law`` (None: not given)

    Each ``key`` below is the spec's key, named in errors as ``what.key``."""

    def __init__(self, name, what, side: "_Side", suffix, add_marker, body_ref, types, stop_law, shared=False):
        self.name, self.what, self._side, self._suffix = name, what, side, suffix
        self.side, self.shared = side.side, bool(shared)
        self._add_marker, self._body_ref, self._types = add_marker, body_ref, types
        self.stop_law = stop_law

    def bodies(self, spec):
        """The two body indices of ``spec["bodies"]`` (``[A, B]``)."""
        b = spec.get("bodies")
        if not isinstance(b, list) or len(b) != 2:
            raise ModelError(f"{self.what}.bodies must name two bodies")
        return tuple(self._body_ref(x, self._suffix, f"{self.what}.bodies") for x in b)

    def body(self, ref, key):
        """The body index of a body name (a per_side element's without its side)."""
        return self._body_ref(ref, self._suffix, f"{self.what}.{key}")

    def point(self, spec, key):
        """A point spec -> (3,) vehicle frame [m], this side's."""
        return self._side.point(spec, f"{self.what}.{key}")

    def axis(self, spec, key):
        """An axis spec -> unit (3,) vector, this side's."""
        return self._side.axis(spec, f"{self.what}.{key}")

    def frame(self, spec):
        """The element frame (3, 3 columns x, y, z) from ``axis`` (default z) and ``x_hint``."""
        return frame_from_axis(self.axis(spec.get("axis", [0, 0, 1]), "axis"),
                               self._side.x_hint(spec.get("x_hint"), f"{self.what}.x_hint"))

    def marker(self, end, body, position, R):
        """A new marker ``<name><end>`` on ``body`` at ``position`` with axes
        ``R`` (vehicle frame) -> its index."""
        return self._add_marker(self.name + end, body, position, R)

    def characteristics(self, spec):
        """A bushing's ``type`` (the model's ``bushing_types``) merged with its
        own keys, damping from a loss factor where not given."""
        return _characteristics(spec, self._types, self.what)

    def mirrored6(self, values):
        """Six left-side values in this side's element frame (local y reversed
        on the right: x, -y, z, -rx, ry, -rz)."""
        return _mirrored(values, MIRROR_LOCAL if self.side == "right" else np.ones(6))


def frame_from_axis(z, x_hint=(1.0, 0.0, 0.0)):
    """Right-handed frame (columns x, y, z) with z along ``z``; x from ``x_hint``."""
    z = np.asarray(z, float) / np.linalg.norm(z)
    x = np.asarray(x_hint, float)
    if abs(x @ z) > 0.9:
        x = np.array([0.0, 0.0, 1.0]) if abs(z[2]) < 0.9 else np.array([0.0, 1.0, 0.0])
    x = x - (x @ z) * z
    x /= np.linalg.norm(x)
    return np.column_stack([x, np.cross(z, x), z])


def rods_inertia(mass, segments, radius):
    """Centre of mass and inertia (3x3, vehicle-aligned axes) of slender solid rods."""
    seg = [(np.asarray(a, float), np.asarray(b, float)) for a, b in segments]
    lengths = np.array([np.linalg.norm(b - a) for a, b in seg])
    masses = mass * lengths / lengths.sum()
    mids = np.array([(a + b) / 2 for a, b in seg])
    com = (masses[:, None] * mids).sum(0) / mass
    I = np.zeros((3, 3))
    for (a, b), mi, li, c in zip(seg, masses, lengths, mids):
        e = (b - a) / li
        I += mi * (li ** 2 / 12 + radius ** 2 / 4) * (np.eye(3) - np.outer(e, e))
        I += mi * radius ** 2 / 2 * np.outer(e, e)
        d = c - com
        I += mi * ((d @ d) * np.eye(3) - np.outer(d, d))
    return com, I


def _mirrored(values, flip):
    """``values * flip`` for a list of six numbers; anything else unchanged
    (kernels.model's validation names the field)."""
    try:
        arr = np.asarray(values, float)
    except (TypeError, ValueError):
        return values
    return (flip * arr).tolist() if arr.shape == (6,) else values


def _characteristics(spec, types, what):
    """Resolve a bushing's type and overrides into stiffness/damping/... rows."""
    out = {}
    if "type" in spec:
        if spec["type"] not in types:
            raise ModelError(f"{what}.type = {spec['type']!r} is not a bushing type "
                             f"(known: {', '.join(sorted(types))})")
        out.update(types[spec["type"]])
    out.update({k: v for k, v in spec.items() if k not in ("type",)})
    if "stiffness" not in out:
        raise ModelError(f"{what}: no stiffness (give 'stiffness' or a 'type')")
    k = np.asarray(out["stiffness"], float)
    if "damping" not in out:
        eta = np.asarray(out.get("loss_factor", 0.0), float)
        if eta.shape not in ((), (6,)) or not np.all(np.isfinite(eta)) or np.any(eta < 0):
            raise ModelError(f"{what}.loss_factor = {out.get('loss_factor')!r} must be one number or six "
                             "(x, y, z, rx, ry, rz), each >= 0")
        f = float(out.get("loss_frequency", 10.0))
        out["damping"] = (eta * k / (2 * math.pi * f)).tolist()
    return out


RACK_KEYS = {"enabled": "bool", "joint": "per-side bushing name", "mass": "kg", "radius": "m",
             "stiffness": "N/m", "lateral_stiffness": "N/m", "rotational_stiffness": "N m/rad",
             "loss_factor": "1"}
RACK_BODY, RACK_HOUSING = "steering_rack", "rack_housing"


def with_steering_rack(cfg: dict, right_hardpoints=None):
    """Apply the optional ``steering_rack`` section of a model config (plain
    dict): a rack body between the two steering joints, held on the chassis
    by one bushing ``rack_housing`` along vehicle y whose axial stiffness is
    the steering system's compliance at the rack (column, torsion bar and
    pinion, housing mounts, with the steering wheel held); the steering
    joints' chassis ends move onto the rack, and the rack housing becomes the
    steering joint (rack travel is imposed at the housing's chassis marker,
    through that compliance). ``right_hardpoints``: the right side's table
    where it differs from the left's mirror image (a hardpoint moved on one
    side). Returns (config, description or None)."""
    rack = cfg.get("steering_rack")
    if not rack or not rack.get("enabled", False):
        return cfg, None
    for key in rack:
        if key not in RACK_KEYS:
            raise ModelError(f"model.steering_rack.{key}: unknown key (known: {', '.join(RACK_KEYS)})")
    import copy
    cfg = copy.deepcopy(cfg)
    joint = rack.get("joint") or cfg.get("steering_joint")
    bushings = (cfg.get("per_side") or {}).get("bushings") or {}
    if not joint or joint not in bushings:
        raise ModelError(f"model.steering_rack.joint = {joint!r} is not a per-side bushing")
    spec = bushings[joint]
    if list(spec.get("bodies", []))[1:] != ["chassis"]:
        raise ModelError(f"model.steering_rack.joint = {joint!r}: its second body must be the chassis "
                         f"(is {spec.get('bodies')})")
    vals = {}
    for key, default in (("mass", 4.0), ("radius", 0.012), ("stiffness", None), ("lateral_stiffness", 1.0e8),
                         ("rotational_stiffness", 1.0e4), ("loss_factor", 0.05)):
        val = rack.get(key, default)
        if val is None:
            raise ModelError("model.steering_rack.stiffness: missing (axial rack stiffness [N/m])")
        try:
            val = float(val)
        except (TypeError, ValueError):
            raise ModelError(f"model.steering_rack.{key} = {val!r} is not a number [{RACK_KEYS[key]}]") from None
        if not (np.isfinite(val) and (val > 0 or (key == "loss_factor" and val >= 0))):
            raise ModelError(f"model.steering_rack.{key} = {val} must be > 0 [{RACK_KEYS[key]}]")
        vals[key] = val
    pl = _Side(cfg.get("hardpoints") or {}, "left").point(spec["at"], f"model.per_side.bushings.{joint}.at")
    pr = (pl * np.array([1.0, -1.0, 1.0]) if right_hardpoints is None else
          _Side(right_hardpoints, "right").point(spec["at"], f"model.per_side.bushings.{joint}.at"))
    centre = 0.5 * (pl + pr)
    shared = cfg.setdefault("shared", {})
    shared.setdefault("bodies", {})[RACK_BODY] = {
        "mass": vals["mass"], "rods": [[pr.tolist(), pl.tolist()]], "radius": vals["radius"]}
    kl, kr = vals["lateral_stiffness"], vals["rotational_stiffness"]
    shared.setdefault("bushings", {})[RACK_HOUSING] = {
        "bodies": [RACK_BODY, "chassis"], "at": centre.tolist(), "axis": [0.0, 1.0, 0.0],
        "stiffness": [kl, kl, vals["stiffness"], kr, kr, kr], "loss_factor": vals["loss_factor"]}
    spec["bodies"] = [spec["bodies"][0], RACK_BODY]
    cfg.pop("steering_rack")
    desc = (f"steering rack on: body {RACK_BODY} ({vals['mass']} kg) carries the {joint} joints; "
            f"bushing {RACK_HOUSING} to the chassis, axial (rack) stiffness {vals['stiffness']:.4g} N/m; "
            f"rack travel imposed at the housing")
    return cfg, desc


# ----------------------------------------------------------------------------- the model file's keys
class Names:
    """A mapping whose keys are the user's names (hardpoints, bodies,
    bushings, ...), each value checked against ``spec``."""

    def __init__(self, spec):
        self.spec = spec


ANY = None                                         # a leaf: any value
POINT = {"along": ANY, "fraction": ANY, "distance": ANY, "mirror": ANY}     # point spec, when a mapping
AXIS = {"along": ANY}                              # axis spec, when a mapping
CURVE = {"x": ANY, "y": ANY, "interpolation": ANY}
CHARACTERISTICS = {"stiffness": ANY, "damping": ANY, "loss_factor": ANY, "loss_frequency": ANY,
                   "play": ANY, "play_law": ANY,
                   "preload": ANY, "offset": ANY,
                   "stiffness_curves": Names(CURVE), "damping_curves": Names(CURVE)}
BODY = {"mass": ANY, "inertia": ANY, "com": POINT, "euler_deg": ANY, "rods": ANY, "radius": ANY}
BUSHING = {"bodies": ANY, "at": POINT, "axis": AXIS, "x_hint": AXIS, "type": ANY,
           "adjust": {"body": ANY, "direction": AXIS, "distance": ANY}, **CHARACTERISTICS}
P2P = {"bodies": ANY, "from": POINT, "to": POINT, "kind": ANY, "stiffness": ANY, "preload": ANY,
       "damping": ANY, "clearance": ANY, "length": ANY, "curve": CURVE, "seat_offset": ANY,
       "law": ANY, "friction": {"force": ANY, "law": ANY, "stiffness": ANY, "damping": ANY, "velocity": ANY}}
SECTION = dict.fromkeys(("E", "G", "A", "Iy", "Iz", "J", "rho", "Ay", "Az"))
FLEXIBLE = {"beam_frame": {"path": ANY, "divisions": ANY, "section": SECTION, "orientation": AXIS,
                           "timoshenko": ANY},
            "fe_export": {"npz": ANY, "matrix_market": {"mass": ANY, "stiffness": ANY, "nodes": ANY}},
            "interfaces": ANY, "fixed_interface_modes": ANY, "damping_ratio": ANY}
ALIGNMENT = {"toe_deg": ANY, "camber_deg": ANY, "toe_by": ANY, "camber_by": ANY,
             "seat_offset_of": ANY, "wheel_load": ANY, "pretension": Names(ANY)}


def model_keys(groups=()) -> dict:
    """The keys a model file may have (nested; :class:`Names` where the user
    names the entries). The section of an added element group (``groups``,
    e.g. :func:`load_element_groups`' ``extra``) takes the common placement
    keys; its other keys are the group's own (its ``validate`` checks them)."""
    section = {"bodies": Names(BODY), "flexible_bodies": Names(FLEXIBLE), "bushings": Names(BUSHING),
               "p2p": Names(P2P)}
    section.update({g.table_key: Names(ANY) for g in groups if not g.builtin})
    return {"name": ANY, "description": ANY, "notes": ANY, "gravity": ANY, "stop_law": ANY,
            "elements": ANY, "hardpoints": Names(ANY), "bushing_types": Names(CHARACTERISTICS),
            "per_side": section, "shared": section, "wheels": {"left": ANY, "right": ANY},
            "reference_bushing": ANY, "steering_joint": ANY, "travel_lock": ANY,
            "steering_rack": dict.fromkeys(RACK_KEYS), "vehicle": dict.fromkeys(VEHICLE_KEYS),
            "alignment": ALIGNMENT, "tyres": dict.fromkeys(TYRE_KEYS),
            "sprung_body": dict.fromkeys(SPRUNG_BODY_KEYS)}


TYRE = "tyre"                       # the tyre bushings are tyre_left, tyre_right
TYRE_KEYS = {"rate": "N/m", "damping": "N s/m"}


def tyre_values(spec, key="model.tyres"):
    """(rate [N/m], damping [N s/m]) of a ``tyres`` mapping, checked: rate > 0,
    damping >= 0, both finite; a rate below 20 kN/m or above 2 MN/m is
    refused as a likely unit mistake (passenger-car and light-truck tyres:
    about 150-600 kN/m)."""
    if not isinstance(spec, dict) or set(spec) - set(TYRE_KEYS) or "rate" not in spec:
        raise ModelError(f"{key} = {spec!r} must be a mapping with 'rate' [N/m] and optionally "
                         "'damping' [N s/m]")
    out = []
    for name, default in (("rate", None), ("damping", 0.0)):
        raw = spec.get(name, default)
        try:
            val = float(raw)
        except (TypeError, ValueError):
            raise ModelError(f"{key}.{name} = {raw!r} is not a number [{TYRE_KEYS[name]}]") from None
        if not math.isfinite(val) or val < 0 or (name == "rate" and val <= 0):
            raise ModelError(f"{key}.{name} = {raw!r} must be {'> 0' if name == 'rate' else '>= 0'} "
                             f"and finite [{TYRE_KEYS[name]}]")
        out.append(val)
    if not 2e4 <= out[0] <= 2e6:
        raise ModelError(f"{key}.rate = {out[0]:g} N/m is outside 2e4-2e6 N/m (a car tyre: about 2.5e5); "
                         "is it in N/mm or kN/m? The model's unit is N/m")
    return out[0], out[1]


SPRUNG_BODY_KEYS = {"mass_per_wheel": "kg"}
GUIDE_RATE = 1.0e10          # N/m and N m/rad: the sprung body's guide in its held directions
SPRUNG_MASS_RANGE = (50.0, 5000.0)   # kg per wheel: outside, a likely unit mistake


def sprung_mass(spec, tyres, key="model.sprung_body"):
    """The sprung mass per wheel [kg] of a ``sprung_body`` mapping, checked:
    finite, inside 50-5000 kg (a car's quarter: about 250-600 kg; outside, a
    likely unit mistake), and only with tyres (a body free in heave stands
    on the tyres; without them the axle and body would float)."""
    if not isinstance(spec, dict) or set(spec) - set(SPRUNG_BODY_KEYS) or "mass_per_wheel" not in spec:
        raise ModelError(f"{key} = {spec!r} must be a mapping with 'mass_per_wheel' [kg]")
    raw = spec["mass_per_wheel"]
    try:
        m = float(raw)
    except (TypeError, ValueError):
        raise ModelError(f"{key}.mass_per_wheel = {raw!r} is not a number [kg]") from None
    lo, hi = SPRUNG_MASS_RANGE
    if not (math.isfinite(m) and lo <= m <= hi):
        raise ModelError(f"{key}.mass_per_wheel = {raw!r} kg is outside {lo:g}-{hi:g} kg (a car's sprung mass "
                         "per wheel: about 250-600 kg); is it in tonnes or grams? The model's unit is kg")
    if tyres is None:
        raise ModelError(f"{key}: a sprung body is free in heave and roll and stands on the tyres: give "
                         "model.tyres (or the load case's tyre)")
    return m


def add_sprung_body(bodies, markers, bushings, wheel_ids, mass_per_wheel):
    """Put the chassis side of the axle on a sprung body (module doc of
    :mod:`kernels.statics`): a rigid body at the middle of the wheel
    centres, mass 2 m and roll inertia 2 m s^2 (s: half the wheel-centre
    track) - two masses m at the wheel centres on vertical guides, which
    is the same motion for small travel - guided by a bushing to the ground
    that holds x, y, pitch and yaw (``GUIDE_RATE``) and leaves heave and
    roll free. Every marker on the ground so far moves onto it (the
    elements to the chassis now end on the body). Returns its body index."""
    wc = np.array([bodies[wheel_ids[s] - 1]["position"] for s in SIDES], float)
    at = wc.mean(axis=0)
    s_half = 0.5 * abs(wc[0, 1] - wc[1, 1])
    m = 2.0 * mass_per_wheel
    i_roll = m * s_half ** 2
    idx = len(bodies) + 1
    bodies.append({"index": idx, "name": SPRUNG_BODY, "mass": m,
                   "inertia": np.diag([i_roll, i_roll, 2.0 * i_roll]).tolist(),   # pitch and yaw: held
                   "position": at.tolist(), "euler": [0.0, 0.0, 0.0]})
    for mk in markers:
        if mk["body"] == GROUND:
            mk["body"] = idx
    k = [GUIDE_RATE] * 6
    for suffix, body in (("/1", GROUND), ("/2", idx)):
        markers.append({"index": len(markers) + 1, "name": BODY_GUIDE + suffix, "body": body,
                        "position": at.tolist(), "orientation": np.eye(3).tolist()})
    bushings.append({"index": len(bushings) + 1, "name": BODY_GUIDE,
                     "marker_1": len(markers) - 1, "marker_2": len(markers),
                     "stiffness": k, "damping": [0.0] * 6, "preload": [0.0] * 6, "offset": [0.0] * 6})
    return idx


def load_element_groups(entries, key="model.elements", groups=()):
    """The force-element groups a model file names in ``elements:`` (a list
    of ``"module:ATTRIBUTE"``, the attribute a
    :class:`kernels.forces.ElementGroup` or a list of them; the module is
    imported like any Python module, e.g. from the working directory or an
    installed package), after ``groups`` (given in Python): a
    :class:`kernels.forces.ElementRegistry`. Nothing is registered anywhere
    else: the registry travels with the model's tables
    (``tables["element_groups"]``). The same group object named twice is one
    entry; another group under a taken name or table key is an error. Every
    failure is a :class:`ModelError` naming the entry. The working
    directory is searched first, as ``python -m sweep`` does (the
    ``axle-sweep`` script does not put it on ``sys.path`` itself)."""
    import importlib
    import os
    import sys
    try:
        registry = forces.ElementRegistry(tuple(groups))
    except (TypeError, ValueError) as err:
        raise ModelError(f"element groups given to the model build: {err}") from None
    if entries is None:
        return registry
    if isinstance(entries, str) or not isinstance(entries, (list, tuple)):
        raise ModelError(f"{key} = {entries!r}: must be a list of 'module:ATTRIBUTE' entries "
                         "(each an ElementGroup or a list of them)")
    for i, entry in enumerate(entries):
        where = f"{key}[{i}] = {entry!r}"
        if not isinstance(entry, str) or entry.count(":") != 1 or not all(entry.split(":")):
            raise ModelError(f"{where}: must be 'module:ATTRIBUTE' (e.g. 'my_elements:TORSION_SPRING')")
        module, attr = entry.split(":")
        cwd = os.getcwd()
        if cwd not in sys.path and "" not in sys.path:
            sys.path.insert(0, cwd)
        try:
            mod = importlib.import_module(module)
        except Exception as err:           # noqa: BLE001 - any import failure is the user's module's
            raise ModelError(f"{where}: cannot import module {module!r} ({type(err).__name__}: {err})") from None
        if not hasattr(mod, attr):
            raise ModelError(f"{where}: module {module!r} has no attribute {attr!r}")
        value = getattr(mod, attr)
        for g in (list(value) if isinstance(value, (list, tuple)) else [value]):
            if not isinstance(g, forces.ElementGroup):
                raise ModelError(f"{where}: {g!r} is not a kernels.forces.ElementGroup")
            try:
                registry = registry.add(g)
            except (TypeError, ValueError) as err:
                raise ModelError(f"{where}: {err}") from None
    return registry


def unknown_keys(cfg, spec=None, path="model"):
    """``[(path, known keys)]`` of every key of a model config (a plain dict)
    that the model file format does not have, depth first."""
    spec = model_keys() if spec is None else spec
    out = []
    if isinstance(spec, Names):
        if isinstance(cfg, dict) and spec.spec is not None:
            for name, value in cfg.items():
                out += unknown_keys(value, spec.spec, f"{path}.{name}")
        return out
    if not isinstance(spec, dict) or not isinstance(cfg, dict):
        return out
    for key, value in cfg.items():
        if key not in spec:
            out.append((f"{path}.{key}", sorted(spec)))
        else:
            out += unknown_keys(value, spec[key], f"{path}.{key}")
    return out


def check_keys(cfg, source=None, groups=()):
    """Raise :class:`ModelError` for the first unknown key of a model config:
    its full path, the closest known key, and (``source``: the model file)
    the file and line. ``groups``: the added element groups, whose sections
    are keys. A misspelt key must never be dropped silently - it would leave
    the value it meant at its default."""
    import difflib
    bad = unknown_keys(_plain(cfg), model_keys(groups))
    if not bad:
        return
    path, known = bad[0]
    key = path.rsplit(".", 1)[1]
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(known)}"
    if not close and path.count(".") == 2 and path.split(".")[1] in ("per_side", "shared"):
        hint += "; a section of a force element of your own needs its module in model.elements"
    where = yaml_line(source, path.split(".")[1:]) if source else None
    more = f" (and {len(bad) - 1} more unknown key(s))" if len(bad) > 1 else ""
    raise ModelError(f"{path}: unknown key ({hint}){more}" + (f" [{where}]" if where else ""))


def yaml_line(source, keys):
    """``'file:line'`` of the key at the path ``keys`` in the YAML file
    ``source``, or ``source`` alone where the file does not have it."""
    import yaml
    try:
        with open(source) as f:
            node = yaml.compose(f)
    except (OSError, yaml.YAMLError):
        return str(source)
    mark = None
    for key in keys:
        if not isinstance(node, yaml.MappingNode):
            return str(source)
        for k, v in node.value:
            if k.value == key:
                mark, node = k.start_mark, v
                break
        else:
            return str(source)
    return f"{source}:{mark.line + 1}" if mark else str(source)


def _without_side(name):
    """``knuckle_left`` -> ``knuckle``: an element or body as the model file names it."""
    for s in SIDES:
        if name.endswith(f"_{s}"):
            return name[:-len(s) - 1]
    return name


def element_line(source, what):
    """``'file:line'`` of a built element's key ``what`` (``model.bushings.
    NAME_left.bodies``) in the model file: the key as written, under
    ``per_side`` (the name without its side) or ``shared``; else the file."""
    keys = what.split(".")[1:]
    tries = [keys]
    if len(keys) >= 2:
        tries += [["per_side", keys[0], _without_side(keys[1]), *keys[2:]], ["shared", *keys]]
    for k in tries:
        where = yaml_line(source, k)
        if where != str(source):
            return where
    return str(source)


INTERFACE_TOL = 1e-6     # m: a marker on a flexible body lies on one of its interface nodes


def flexible_body(name, spec, side, source=None):
    """The Craig-Bampton body of a ``flexible_bodies`` entry: (ReducedBody,
    damping ratio). The FE model is one of

    * ``beam_frame``: ``path`` point specs joined by straight elements, each
      segment in ``divisions`` elements; ``section``: the
      :class:`sweep.axle.fe.Section` fields (SI units);
    * ``fe_export``: an FE export, ``npz: PATH`` (arrays M, K, nodes) or
      ``matrix_market: {mass: PATH, stiffness: PATH, nodes: PATH}``
      (:mod:`sweep.axle.fe.fe_import`); node positions in the vehicle frame
      at the design position [m], 6 DOF per node; relative paths from the
      model file's folder (``source``), else the working directory. Its
      reduction is cached beside the compilation cache (``craig_bampton/``).

    ``interfaces``: point specs of the nodes where elements attach (each a
    node of the FE model, 1 um); ``fixed_interface_modes``: the number of
    fixed-interface normal modes (the body's elastic modes are 6 per
    interface - 6 plus these, a multiple of 6); ``damping_ratio``: modal
    damping ratio(s)."""
    from sweep.axle.fe import FlexibleBodyError, reduce
    what = f"model.flexible_bodies.{name}"
    if not isinstance(spec, dict):
        raise ModelError(f"{what} must be a mapping")
    if ("beam_frame" in spec) == ("fe_export" in spec):
        raise ModelError(f"{what}: give exactly one FE model, beam_frame or fe_export")
    if "fe_export" in spec:
        return _fe_export_body(what, spec, side, source)
    bf = spec.get("beam_frame")
    if not isinstance(bf, dict):
        raise ModelError(f"{what}.beam_frame: missing (the FE model of the body)")
    from sweep.axle.fe import BeamFrame, Section, assemble
    path = bf.get("path")
    if not isinstance(path, list) or len(path) < 2:
        raise ModelError(f"{what}.beam_frame.path = {path!r}: need a list of at least two points")
    pts = [side.point(p, f"{what}.beam_frame.path") for p in path]
    div = bf.get("divisions", 4)
    if isinstance(div, bool) or not isinstance(div, int) or div < 1:
        raise ModelError(f"{what}.beam_frame.divisions = {div!r}: need a positive integer")
    nodes = [a + (b - a) * k / div for a, b in zip(pts[:-1], pts[1:]) for k in range(div)] + [pts[-1]]
    nodes = np.array(nodes)
    sec = bf.get("section")
    if not isinstance(sec, dict):
        raise ModelError(f"{what}.beam_frame.section: missing (E, G, A, Iy, Iz, J, rho)")
    missing = [k for k in ("E", "G", "A", "Iy", "Iz", "J", "rho") if k not in sec]
    if missing:
        raise ModelError(f"{what}.beam_frame.section: missing {', '.join(missing)}")
    zeta, n_fixed, at = _reduction_spec(what, spec, side, nodes, "beam_frame.path")
    try:
        frame = BeamFrame(nodes=nodes, elements=np.array([[i, i + 1] for i in range(len(nodes) - 1)]),
                          sections=Section(**{k: float(v) for k, v in sec.items()}),
                          orientation=None if bf.get("orientation") is None else
                          side.axis(bf["orientation"], f"{what}.beam_frame.orientation"),
                          timoshenko=bool(bf.get("timoshenko", False)))
        M, K = assemble(frame)
        rb = reduce(M, K, nodes, at, n_modes=n_fixed)
    except FlexibleBodyError as err:
        raise ModelError(f"{what}: {err}") from None
    return _checked(what, rb, n_fixed), zeta


def _reduction_spec(what, spec, side, nodes, node_source):
    """(damping ratio, fixed-interface mode count, interface node indices) of a
    ``flexible_bodies`` entry whose FE model has the node positions ``nodes``."""
    zeta = spec.get("damping_ratio")
    if zeta is None:
        raise ModelError(f"{what}.damping_ratio: missing (modal damping ratio of the elastic modes)")
    n_fixed = spec.get("fixed_interface_modes", 6)
    if isinstance(n_fixed, bool) or not isinstance(n_fixed, int) or n_fixed < 0:
        raise ModelError(f"{what}.fixed_interface_modes = {n_fixed!r}: need an integer >= 0")
    ifaces = spec.get("interfaces")
    if not isinstance(ifaces, list) or not ifaces:
        raise ModelError(f"{what}.interfaces: need a list of the points where elements attach")
    at = []
    for j, p in enumerate(ifaces):
        x = side.point(p, f"{what}.interfaces[{j}]")
        d = np.linalg.norm(nodes - x, axis=1)
        if d.min() > INTERFACE_TOL:
            raise ModelError(f"{what}.interfaces[{j}] = {p!r} at {np.round(x, 4).tolist()} is not a node of "
                             f"{node_source} (nearest {d.min() * 1e3:.3g} mm away)")
        at.append(int(np.argmin(d)))
    return zeta, n_fixed, at


def _fe_export_body(what, spec, side, source):
    """The reduced body of an ``fe_export`` entry (cached reduction)."""
    import os
    from sweep.core import runtime
    from sweep.axle.fe import FlexibleBodyError, load_matrix_market, load_npz, reduce_cached
    fe = spec["fe_export"]
    if not isinstance(fe, dict) or len(fe) != 1 or not set(fe) <= {"npz", "matrix_market"}:
        raise ModelError(f"{what}.fe_export = {fe!r}: give one of npz: PATH or matrix_market: "
                         "{mass: PATH, stiffness: PATH, nodes: PATH}")
    base = os.path.dirname(os.path.abspath(source)) if source else os.getcwd()

    def path(p, key):
        if not isinstance(p, str) or not p:
            raise ModelError(f"{what}.fe_export.{key} = {p!r}: need a file path")
        full = p if os.path.isabs(p) else os.path.join(base, p)
        if not os.path.isfile(full):
            raise ModelError(f"{what}.fe_export.{key} = {p!r}: no such file ({full})")
        return full
    try:
        if "npz" in fe:
            model = load_npz(path(fe["npz"], "npz"))
        else:
            mm = fe["matrix_market"] or {}
            model = load_matrix_market(*(path(mm.get(k), f"matrix_market.{k}") for k in ("mass", "stiffness", "nodes")))
    except FlexibleBodyError as err:
        raise ModelError(f"{what}.fe_export: {err}") from None
    zeta, n_fixed, at = _reduction_spec(what, spec, side, model.nodes, "the FE export's nodes")
    cache = os.path.join(runtime.cache_dir() or os.path.join(base, ".cache"), "craig_bampton")
    try:
        rb = reduce_cached(model.M, model.K, model.nodes, at, n_modes=n_fixed, cache_dir=cache)
    except FlexibleBodyError as err:
        raise ModelError(f"{what}: {err}") from None
    return _checked(what, rb, n_fixed), zeta


def _checked(what, rb, n_fixed):
    """The reduced body, refused unless its modes fill whole state slots and are mean-axis."""
    from sweep.axle.fe import FlexibleBodyError
    from sweep.axle.fe.model_rows import check_mean_axis
    if rb.n_modes % 6:
        raise ModelError(f"{what}.fixed_interface_modes = {n_fixed}: gives {rb.n_modes} elastic modes (6 per "
                         f"interface - 6 + these); the kernels need a multiple of 6: use "
                         f"{n_fixed + (-rb.n_modes) % 6}")
    try:
        check_mean_axis(rb, what)
    except FlexibleBodyError as err:
        raise ModelError(str(err)) from None
    return rb


def flexible_rows(flexible, markers):
    """The ``flexible_bodies`` table: every marker on a flexible body becomes
    an interface entry of the node it lies on."""
    from sweep.axle.fe import FlexibleBodyError
    from sweep.axle.fe.model_rows import flexible_row, interface_entry
    rows = []
    for fi, (name, idx, rb, zeta) in enumerate(flexible):
        entries = []
        for mk in markers:
            if mk["body"] != idx:
                continue
            d = np.linalg.norm(rb.interface_positions - np.asarray(mk["position"]), axis=1)
            if d.min() > INTERFACE_TOL:
                raise ModelError(f"{mk['name'].rsplit('/', 1)[0]}: its marker on flexible body {name} at "
                                 f"{np.round(mk['position'], 4).tolist()} is not at one of the body's interfaces "
                                 f"{np.round(rb.interface_positions, 4).tolist()} (model.flexible_bodies.{name}"
                                 ".interfaces)")
            entries.append(interface_entry(rb, int(np.argmin(d)), mk["index"]))
        try:
            rows.append(flexible_row(rb, name=name, index=idx, flex_index=fi + 1, interfaces=entries,
                                     damping_ratio=zeta))
        except FlexibleBodyError as err:
            raise ModelError(f"model.flexible_bodies.{name}: {err}") from None
    return rows


def check_alignment(cfg):
    """The names the ``alignment`` section gives (a plain dict): ``toe_by`` /
    ``camber_by`` a per-side bushing with an ``adjust`` entry,
    ``seat_offset_of`` a per-side P2P element. Checked by every entry point
    (through :func:`build_tables`), not only by ``python -m sweep.align``."""
    a = cfg.get("alignment") or {}
    per_side = cfg.get("per_side") or {}
    bushings = per_side.get("bushings") or {}
    for key in ("toe_by", "camber_by"):
        if key in a and (a[key] not in bushings or "adjust" not in (bushings[a[key]] or {})):
            raise ModelError(f"model.alignment.{key} = {a[key]!r}: no per-side bushing of that "
                             "name with an `adjust` entry")
    p2p = per_side.get("p2p") or {}
    if "seat_offset_of" in a and a["seat_offset_of"] not in p2p:
        raise ModelError(f"model.alignment.seat_offset_of = {a['seat_offset_of']!r}: no per-side P2P element")
    if "seat_offset_of" in a and (p2p[a["seat_offset_of"]] or {}).get("kind") != "spring":
        raise ModelError(f"model.alignment.seat_offset_of = {a['seat_offset_of']!r} is a "
                         f"{(p2p[a['seat_offset_of']] or {}).get('kind')!r}, not a spring (the seat offset "
                         "sets a spring's ride height)")
    for name, dirs in (a.get("pretension") or {}).items():
        if name not in bushings:
            raise ModelError(f"model.alignment.pretension.{name}: no per-side bushing of that name")
        if not isinstance(dirs, list) or not dirs or any(d not in DIRECTIONS for d in dirs):
            raise ModelError(f"model.alignment.pretension.{name} = {dirs!r} must list directions "
                             f"of {', '.join(DIRECTIONS)}")


class _StrictLoader:
    """A YAML ``SafeLoader`` that refuses a key given twice in one mapping
    (PyYAML keeps the last one silently)."""

    @staticmethod
    def make():
        import yaml

        class Loader(yaml.SafeLoader):
            pass

        def mapping(loader, node, deep=False):
            seen = {}
            for k, _ in node.value:
                key = loader.construct_object(k, deep=deep)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r} (first at line {seen[key] + 1})", k.start_mark)
                seen[key] = k.start_mark.line
            return yaml.SafeLoader.construct_mapping(loader, node, deep)
        Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
        return Loader


def load_yaml_strict(path):
    """A YAML file's content, strictly: a duplicate key or a syntax error is
    one :class:`ModelError` naming ``file:line:column``."""
    import yaml
    try:
        with open(path) as fh:
            return yaml.load(fh, Loader=_StrictLoader.make())
    except OSError as err:
        raise ModelError(f"{path}: cannot be read ({err.strerror})") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ModelError(f"{where}: {problem}") from None


def load_model_file(path) -> dict:
    """A model YAML file as a plain dict, strictly: a duplicate key, a syntax
    error, a file that is empty or not a mapping are one :class:`ModelError`
    naming ``file:line:column``; unknown keys are checked with the line."""
    cfg = load_yaml_strict(path)
    if not isinstance(cfg, dict) or not cfg:
        raise ModelError(f"model file {path}: {'is empty' if not cfg else 'is not a mapping of model keys'}")
    registry = load_element_groups(cfg.get("elements"))       # their sections are model keys
    check_keys(cfg, path, registry.extra)
    return cfg


def model_source():
    """The model file of the running Hydra job (its ``model`` choice in a
    file config source), or None (no Hydra job, or not from a file)."""
    import os
    try:
        from hydra.core.hydra_config import HydraConfig
        runtime = HydraConfig.get().runtime
        choice = runtime.choices.get("model")
        sources = list(runtime.config_sources)
    except Exception:                 # no Hydra job (tests, notebooks): no file to name
        return None
    for src in sources:
        if choice and src.get("schema") == "file":
            path = os.path.join(src.get("path"), "model", f"{choice}.yaml")
            if os.path.isfile(path):
                return os.path.relpath(path) if not os.path.relpath(path).startswith("..") else path
    return None


def moved_hardpoints(hp, offsets):
    """{side: hardpoint table} with ``offsets`` applied: (name, side, (3,)
    offset [m] in the left side's frame) with side both | left | right; the
    right side's table is mirrored by :class:`_Side`, so an offset moves the
    right point by its mirror image (y flips sign). A moved hardpoint must
    be given as coordinates (a point defined along others follows them)."""
    out = {}
    for s in SIDES:
        table = dict(hp)
        for name, side, d in offsets:
            if side not in ("both", s):
                continue
            if name not in hp:
                raise ModelError(f"hardpoint {name!r} is not in model.hardpoints (known: {', '.join(sorted(hp))})")
            if isinstance(hp[name], dict):
                raise ModelError(f"model.hardpoints.{name} is defined through other points ({hp[name]!r}): "
                                 "move those instead")
            table[name] = (np.asarray(table[name], float) + np.asarray(d, float)).tolist()
        out[s] = table
    return out


def build_tables(cfg, source=None, hardpoint_offsets=(), groups=()) -> dict:
    """Model config -> validated-ready plain tables (see :mod:`kernels.model`).
    ``source``: the model file, named with the line in an unknown-key error
    (default: the running Hydra job's model file). ``hardpoint_offsets``:
    hardpoints moved before anything is built (:func:`moved_hardpoints`):
    body frames, rod inertias, marker and element frames, reference lengths
    and the design position all follow - the same tables as a model file
    with the points moved by hand; shared elements (the centre) see the left
    side's points. ``groups``: force-element groups
    (:class:`kernels.forces.ElementGroup`) the model has beside the built-in
    ones and those its ``elements:`` names (:func:`load_element_groups`);
    the tables name them all (``element_groups``)."""
    cfg = _plain(cfg)
    if not cfg:
        raise ModelError("model: the model config is empty (no bodies, bushings or wheels)")
    source = source or model_source()
    registry = load_element_groups(cfg.get("elements"), groups=groups)   # before the keys: their sections are keys
    check_keys(cfg, source, registry.extra)
    if registry.extra:            # their number keys (the built-in groups' are checked with the config)
        from sweep.core.config import check_model
        check_model(cfg, groups=registry.extra, sections={g.table_key for g in registry.extra})
    check_alignment(cfg)
    if hardpoint_offsets:
        hps = moved_hardpoints(cfg.get("hardpoints") or {}, hardpoint_offsets)
        cfg = {**cfg, "hardpoints": hps["left"]}
    else:
        hps = None
    cfg, rack_desc = with_steering_rack(cfg, hps and hps["right"])
    hp = cfg.get("hardpoints") or {}
    types = cfg.get("bushing_types") or {}
    stop_law = cfg.get("stop_law")
    if stop_law is not None and stop_law not in STOP_LAWS:
        raise ModelError(f"model.stop_law = {stop_law!r} is not one of {', '.join(STOP_LAWS)}")
    bodies, markers, bushings, p2p = [], [], [], []
    body_id = {"chassis": GROUND}

    def add_body(name, spec, side: _Side):
        what = f"model.bodies.{name}"
        if name in body_id:
            raise ModelError(f"{what}: duplicate body name")
        mass = spec.get("mass")
        both = [k for k in ("inertia", "com") if k in spec]
        if "rods" in spec and both:
            raise ModelError(f"{what}: give either 'rods' (centre of mass and inertia from the rods) or "
                             f"'com' and 'inertia', not both ({' and '.join(both)} beside rods)")
        if "rods" in spec:
            segs = [(side.point(a, what + ".rods"), side.point(b, what + ".rods"))
                    for a, b in spec["rods"]]
            com, inertia = rods_inertia(float(mass) if mass else 1.0, segs,
                                        float(spec.get("radius", 0.01)))
        else:
            inertia = np.asarray(spec.get("inertia", np.nan), float)
            if inertia.shape == (3,):
                inertia = np.diag(inertia)
            if inertia.shape == (3, 3):
                inertia = side.S @ inertia @ side.S
            com = None
        if "com" in spec:
            com = side.point(spec["com"], what + ".com")
        if com is None:
            raise ModelError(f"{what}: missing 'com' (or 'rods')")
        if "rods" not in spec and "inertia" not in spec:
            raise ModelError(f"{what}: missing 'inertia' [kg m^2] (or 'rods')")
        eul = np.radians(np.asarray(spec.get("euler_deg", [0, 0, 0]), float))
        if side.side == "right":
            eul = eul * np.array([-1.0, 1.0, -1.0])
        if "rods" in spec and np.any(eul != 0):
            R = np.asarray(euler_to_matrix(eul))
            inertia = R.T @ inertia @ R
        idx = len(bodies) + 1
        body_id[name] = idx
        bodies.append({"index": idx, "name": name, "mass": mass,
                       "inertia": np.asarray(inertia).tolist(),
                       "position": np.asarray(com).tolist(), "euler": eul.tolist()})

    def body_ref(ref, suffix, what):
        if suffix and isinstance(ref, str) and _without_side(ref) != ref and (_without_side(ref) + suffix) in body_id:
            where = element_line(source, what) if source else None
            raise ModelError(f"{what} = {ref!r}: a per_side element names a per_side body without its "
                             f"_left / _right ({_without_side(ref)!r}); as written, the right side's element "
                             f"would join the left side's body" + (f" [{where}]" if where else ""))
        for cand in ((ref + suffix) if suffix else ref, ref):
            if cand in body_id:
                return body_id[cand]
        where = element_line(source, what) if source else None
        if suffix:
            known = sorted({_without_side(n) for n in body_id})
            hint = "a per_side body is named without its _left / _right here"
        else:
            known = sorted(body_id)
            hint = "an element under `shared` names a per_side body with its _left / _right"
        raise ModelError(f"{what} = {ref!r} is not a body (known: {', '.join(known)}; {hint})"
                         + (f" [{where}]" if where else ""))

    def add_marker(name, body, position, R):
        idx = len(markers) + 1
        markers.append({"index": idx, "name": name, "body": body,
                        "position": np.asarray(position).tolist(),
                        "orientation": np.asarray(R).tolist()})
        return idx

    extra = {g.table_key: [] for g in registry.extra}
    rows_of = {"bushings": bushings, "p2p": p2p, **extra}

    def add_element(group, name, spec, side, suffix):
        """A row of an element group from its model-file entry (``group.row``,
        default :func:`kernels.forces.placed_row`)."""
        what = f"model.{group.table_key}.{name}"
        if not isinstance(spec, dict):
            raise ModelError(f"{what} must be a mapping")
        place = Placement(name, what, side, suffix, add_marker, body_ref, types, stop_law, shared=not suffix)
        rows = rows_of[group.table_key]
        row = {"index": len(rows) + 1, "name": name}
        try:
            fields = (group.row or forces.placed_row)(spec, place)
        except ModelError:
            raise
        except (TypeError, ValueError, KeyError) as err:     # a group's own row function: one line naming the entry
            raise ModelError(str(err) if what in str(err) else f"{what}: {err}") from None
        row.update(fields)
        rows.append(row)

    per_side = cfg.get("per_side") or {}
    shared = cfg.get("shared") or {}
    sides = {s: _Side(hps[s] if hps else hp, s) for s in SIDES}
    centre = _Side(hp, "left")
    for name, spec in (shared.get("bodies") or {}).items():
        add_body(name, spec, centre)
    for s in SIDES:
        for name, spec in (per_side.get("bodies") or {}).items():
            add_body(f"{name}_{s}", spec, sides[s])
    if per_side.get("flexible_bodies"):
        raise ModelError("model.per_side.flexible_bodies: a flexible body is built once, under "
                         "`shared.flexible_bodies` (e.g. a twist beam's cross member); per-side flexible "
                         "bodies are not supported")
    flexible = []                 # (name, body index, ReducedBody, damping ratio)
    for name, spec in (shared.get("flexible_bodies") or {}).items():
        if name in body_id:
            raise ModelError(f"model.flexible_bodies.{name}: duplicate body name")
        rb, zeta = flexible_body(name, spec, centre, source or model_source())
        from sweep.axle.fe.model_rows import frame_row    # scipy only for models with flexible bodies
        body_id[name] = len(bodies) + 1
        bodies.append(frame_row(rb, name=name, index=body_id[name], origin=np.zeros(3)))
        flexible.append((name, body_id[name], rb, zeta))
    builtin = [g for g in registry if g.builtin]
    for s in SIDES:
        for g in builtin:
            for name, spec in (per_side.get(g.table_key) or {}).items():
                add_element(g, f"{name}_{s}", spec, sides[s], f"_{s}")
    for g in builtin:
        for name, spec in (shared.get(g.table_key) or {}).items():
            add_element(g, name, spec, centre, "")
    for g in registry.extra:
        for s in SIDES:
            for name, spec in (per_side.get(g.table_key) or {}).items():
                add_element(g, f"{name}_{s}", spec, sides[s], f"_{s}")
        for name, spec in (shared.get(g.table_key) or {}).items():
            add_element(g, name, spec, centre, "")

    wheels = cfg.get("wheels") or {"left": "wheel_left", "right": "wheel_right"}
    wheel_ids = {s: body_ref(wheels[s], "", f"model.wheels.{s}") for s in SIDES}
    if cfg.get("sprung_body") is not None:
        add_sprung_body(bodies, markers, bushings, wheel_ids, sprung_mass(cfg["sprung_body"], cfg.get("tyres")))
    if cfg.get("tyres") is not None:
        rate, damping = tyre_values(cfg["tyres"])
        for s in SIDES:
            # a vertical spring-damper between the ground and the wheel centre
            # (kernels.road: the road's part enters as the wheel-centre force)
            at = np.asarray(bodies[wheel_ids[s] - 1]["position"], float)
            name = TYRE_BUSHINGS[SIDES.index(s)]
            bushings.append({"index": len(bushings) + 1, "name": name,
                             "marker_1": add_marker(name + "/1", GROUND, at, np.eye(3)),
                             "marker_2": add_marker(name + "/2", wheel_ids[s], at, np.eye(3)),
                             "stiffness": [0.0, 0.0, rate, 0.0, 0.0, 0.0],
                             "damping": [0.0, 0.0, damping, 0.0, 0.0, 0.0],
                             "preload": [0.0] * 6, "offset": [0.0] * 6})
    tables = {
        "name": cfg.get("name", "model"),
        "gravity": cfg.get("gravity", [0.0, 0.0, -9.81]),
        "bodies": bodies, "markers": markers, "bushings": bushings, "p2p": p2p,
        "wheels": wheel_ids,
    }
    tables.update({key: rows for key, rows in extra.items() if rows})
    if registry.extra:
        tables["element_groups"] = registry.extra
    if cfg.get("tyres") is not None:
        tables["tyres"] = list(TYRE_BUSHINGS)
    if cfg.get("sprung_body") is not None:
        tables["sprung_body"] = {"body": SPRUNG_BODY, "guide": BODY_GUIDE,
                                 "mass_per_wheel": sprung_mass(cfg["sprung_body"], cfg.get("tyres"))}
    # the left side's hardpoint table as built (informational: sweep
    # parameters of target hardpoint name their points against it)
    tables["hardpoints"] = {n: (dict(v) if isinstance(v, dict) else [float(x) for x in v]) for n, v in hp.items()}
    if flexible:
        tables["flexible_bodies"] = flexible_rows(flexible, markers)
    names = [b["name"] for b in bushings]

    def per_side_bushing(key):
        """{side: '<name>_<side>'} of the per-side bushing named by ``model.<key>``."""
        name = cfg.get(key)
        for s in SIDES:
            if f"{name}_{s}" not in names:
                raise ModelError(f"model.{key} = {name!r}: no bushing {name}_{s}")
        return {s: f"{name}_{s}" for s in SIDES}
    tables["reference_bushings"] = per_side_bushing("reference_bushing") if cfg.get("reference_bushing") else {}
    # the bushing whose second marker the steering rack (or the subframe's
    # toe-link mount) moves: K&C steering axis, caster, kingpin, rack travel
    steer = cfg.get("steering_joint")
    if rack_desc:
        tables["steering_joints"] = {s: RACK_HOUSING for s in SIDES}
        tables["steering_rack"] = rack_desc
    elif steer:
        tables["steering_joints"] = per_side_bushing("steering_joint")
    lock = cfg.get("travel_lock")
    if lock:
        if not (steer or rack_desc):
            raise ModelError(f"model.travel_lock = {lock!r} needs model.steering_joint or an enabled "
                             "model.steering_rack (they define the steering axis)")
        tables["travel_lock"] = {}
        for s in SIDES:
            body_ref(lock, f"_{s}", "model.travel_lock")
            tables["travel_lock"][s] = f"{lock}_{s}"
    if cfg.get("vehicle") is not None:
        tables["vehicle"] = vehicle_table(cfg["vehicle"])
    check_lengths_are_metres(tables, source)
    return tables


FAR_FROM_WHEELS = 3.0      # m: no point of an axle lies farther from both wheel centres
LONG_CLEARANCE = 0.5       # m: no stop clearance of a wheel suspension is longer


def check_lengths_are_metres(tables, source=None):
    """A model whose lengths look like millimetres (the model's unit is the
    metre) is refused with a hint, before any solver is asked: an element's
    point or a body's centre of mass more than ``FAR_FROM_WHEELS`` from both
    wheel centres, a stop clearance above ``LONG_CLEARANCE``."""
    centres = np.array([tables["bodies"][tables["wheels"][s] - 1]["position"] for s in SIDES], float)
    points = [(f"model.bodies.{b['name']}", b["position"]) for b in tables["bodies"]]
    points += [(f"the point of element {m['name'].split('/')[0]}", m["position"]) for m in tables["markers"]]
    for what, p in points:
        d = float(np.min(np.linalg.norm(centres - np.asarray(p, float), axis=1)))
        if not d <= FAR_FROM_WHEELS:
            raise ModelError(f"{what} at {[round(float(x), 6) for x in p]} lies {d:.4g} m from the nearer wheel "
                             f"centre (more than {FAR_FROM_WHEELS:g} m): lengths are in metres - are these "
                             "millimetres?")
    for row in tables["p2p"]:
        c = row.get("clearance")
        if c is not None and not abs(float(c)) <= LONG_CLEARANCE:
            what = f"model.p2p.{row['name']}.clearance"
            where = f" [{element_line(source, what)}]" if source else ""
            raise ModelError(f"{what} = {c} m is longer than {LONG_CLEARANCE:g} m: lengths are in metres - is "
                             f"this millimetres?{where}")


VEHICLE_KEYS = {"axle": "front | rear", "wheelbase": "m", "cg_height": "m", "front_brake_share": "1",
                "kerb_wheel_load": "N", "laden_wheel_load": "N"}
VEHICLE_OPTIONAL = ("kerb_wheel_load", "laden_wheel_load")


def vehicle_table(veh) -> dict:
    """Validate the model's ``vehicle`` section (the car the axle sits in: what
    the anti-dive / anti-lift / anti-squat percentages need)."""
    if not isinstance(veh, dict):
        raise ModelError(f"model.vehicle = {veh!r} must be a mapping of {', '.join(VEHICLE_KEYS)}")
    for key in veh:
        if key not in VEHICLE_KEYS:
            raise ModelError(f"model.vehicle.{key}: unknown key (known: {', '.join(VEHICLE_KEYS)})")
    missing = [k for k in VEHICLE_KEYS if k not in veh and k not in VEHICLE_OPTIONAL]
    if missing:
        raise ModelError(f"model.vehicle: missing {', '.join(missing)}")
    if veh["axle"] not in ("front", "rear"):
        raise ModelError(f"model.vehicle.axle = {veh['axle']!r} must be front or rear")
    out = {"axle": veh["axle"]}
    for key in ("wheelbase", "cg_height", "front_brake_share", *VEHICLE_OPTIONAL):
        if key not in veh:
            continue
        try:
            val = float(veh[key])
        except (TypeError, ValueError):
            raise ModelError(f"model.vehicle.{key} = {veh[key]!r} is not a number [{VEHICLE_KEYS[key]}]") from None
        ok = 0.0 <= val <= 1.0 if key == "front_brake_share" else val > 0
        if not (np.isfinite(val) and ok):
            raise ModelError(f"model.vehicle.{key} = {val} must be "
                             f"{'in [0, 1]' if key == 'front_brake_share' else '> 0'} [{VEHICLE_KEYS[key]}]")
        out[key] = val
    return out


def model_from_config(model_cfg, hardpoint_offsets=()):
    """The :class:`kernels.model.Model` of a model config (``cfg.model``),
    with ``hardpoint_offsets`` applied (:func:`build_tables`)."""
    from kernels.model import build_model
    return build_model(build_tables(model_cfg, hardpoint_offsets=hardpoint_offsets))
