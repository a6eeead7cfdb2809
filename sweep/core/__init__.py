"""The bottom layer of ``sweep``: the job configuration and the run time.

- :mod:`sweep.core.config` - the configuration schema, its checks and
  ``ConfigError`` (one line naming the field and the value);
- :mod:`sweep.core.runtime` - devices, precision, logging and the caches;
- :mod:`sweep.core.tracecache` - traced programs kept on disk between runs.
"""
