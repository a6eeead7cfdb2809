"""The scalar program's building blocks shared by the generator
(:mod:`sweep.codegen.emit`) and the C writer (:mod:`sweep.codegen.csource`):
element references and the loop statement."""
from __future__ import annotations

from dataclasses import dataclass, field

BUF = 1 << 40          # references >= BUF are arena elements (BUF + index)
CONST = -1             # reference of a generation-time constant


@dataclass
class Loop:
    """``for it in range(length)``: ``phis`` (carried slots) start as ``init``
    (refs) and take ``nxt`` after every ``body``; ``kind`` 'scan' or
    'while' (``cond_ref``: the per-variant continue flag, computed at the
    end of the body and before the first iteration in ``pre``)."""
    kind: str
    length: int
    depth: int
    phis: list
    init: list
    body: list = field(default_factory=list)
    nxt: list = field(default_factory=list)
    pre: list = field(default_factory=list)
    cond_ref: int = None
    cond_pre: int = None
    active: int = None        # while: the slot of the per-variant 'still running' mask


def int_refs(refs):
    """``refs`` (value ids as ints, constants as floats) as an int64 array,
    constants -1 (C-level loops: a manoeuvre's outputs are millions)."""
    import itertools

    import numpy as np
    is_const = np.fromiter(map(isinstance, refs, itertools.repeat(float)), bool, len(refs))
    vals = np.array(refs, dtype=np.float64)
    vals[is_const] = -1.0                  # before the cast: a NaN or infinite constant has no int
    return vals.astype(np.int64)
