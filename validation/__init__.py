"""Validation against independent codes (repository only, not installed):
``validation.crosscheck_exudyn`` rebuilds the axle in Exudyn (see README.md
here and docs/crosscheck.md). Imported by the tests with the repository root
on ``sys.path`` (tests/conftest.py)."""
