"""Model building: from a model file (YAML) to the kernels' model tables.

- :mod:`sweep.axle.builder` - the model file: bodies, markers, force
  elements, hardpoints, user element groups; checks naming the field;
- :mod:`sweep.axle.params` - sweep and tuning targets on the model tables;
- :mod:`sweep.axle.alignment` - static alignment (toe, camber, ride height)
  solved or held per variant;
- :mod:`sweep.axle.diagnose` - what is physically wrong with a model
  (unrestrained directions, implausible static state);
- :mod:`sweep.axle.fe` - flexible bodies' finite-element preprocessing.
"""
