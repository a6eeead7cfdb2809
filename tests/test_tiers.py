"""The suite's tier rule (tests/conftest.py, docs/testing.md): a test's tier
is its folder (tests/e2e/) or the one pytestmark at the top of its file; a
tier marker on a test function, class or parameter is refused, and so is a
file whose folder and marker name two tiers."""
import os
import types

import pytest

from tests.conftest import TESTS, _tier_of


def item(path, own=(), module_marks=(), cls_marks=()):
    """A stand-in for a collected test item: what _tier_of reads."""
    cls = type("TestX", (), {"pytestmark": list(cls_marks)}) if cls_marks else None
    return types.SimpleNamespace(nodeid=f"{path}::test_x", path=os.path.join(TESTS, path),
                                 own_markers=list(own), cls=cls,
                                 module=types.SimpleNamespace(pytestmark=list(module_marks)))


def test_the_tier_comes_from_the_folder_or_the_files_marker():
    assert _tier_of(item("kernels/test_a.py")) == "fast"
    assert _tier_of(item("e2e/test_a.py")) == "e2e"
    assert _tier_of(item("kernels/test_a.py", module_marks=[pytest.mark.slow.mark])) == "slow"
    assert _tier_of(item("validation/test_a.py", module_marks=[pytest.mark.validation.mark,
                                                               pytest.mark.skipif(False, reason="").mark])) \
        == "validation"
    # a label is no tier: a notebook test of tests/e2e/ is e2e
    assert _tier_of(item("e2e/test_a.py", own=[pytest.mark.notebook.mark])) == "e2e"


@pytest.mark.parametrize("kw", [dict(own=[pytest.mark.slow.mark]), dict(cls_marks=[pytest.mark.validation.mark]),
                                dict(own=[pytest.mark.e2e.mark])])
def test_a_tier_marker_on_a_test_is_refused(kw):
    with pytest.raises(pytest.UsageError, match="tier marker .* on a test"):
        _tier_of(item("kernels/test_a.py", **kw))


def test_two_tiers_for_one_file_are_refused():
    with pytest.raises(pytest.UsageError, match="more than one tier"):
        _tier_of(item("e2e/test_a.py", module_marks=[pytest.mark.slow.mark]))
