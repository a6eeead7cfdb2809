"""Names shared by the kernels, the cubes and the configs - defined once.

The order of each tuple is the order of the corresponding array axis
everywhere (state, loads, cube coordinates).
"""
SIDES = ("left", "right")                          # wheel / axle side
AXES = ("x", "y", "z")                             # vehicle-frame axes (x forward, y left, z up)
DIRECTIONS = ("x", "y", "z", "rx", "ry", "rz")     # bushing directions / small-displacement DOFs
COMPONENTS = ("fx", "fy", "fz", "mx", "my", "mz")  # force and torque components
COMPONENT_UNITS = ("N", "N", "N", "N m", "N m", "N m")
TYRE_BUSHINGS = ("tyre_left", "tyre_right")        # the tyres of a model with `tyres` (road load cases)
SPRUNG_BODY = "sprung_body"                        # the body of a model with `sprung_body` (on its guide)
BODY_GUIDE = "sprung_body_guide"                   # the guide bushing between the ground and the sprung body
SPRUNG_BODY_FREE = (2, 3)                          # the guide's free directions: heave (z) and roll (rx)
