"""Results: the result cube and everything that writes, checks or draws it.

- :mod:`sweep.results.cube` - cube construction and its attributes;
- :mod:`sweep.results.schema` - the cube's public schema, checked by the
  project itself;
- :mod:`sweep.results.store` - the zarr store: chunks written atomically,
  resumed, healed, locked;
- :mod:`sweep.results.status` - the per-variant status table;
- :mod:`sweep.results.plots` - the job's figures.
"""
