"""Every mutant of the mutation run (tests/mutants.py) still applies to the
source - each edit's text is found as often as the mutant expects - and its
tests are where it names them. A refactor
that moves or rewrites a mutated line makes the mutant stale - the mutation
run would report it instead of testing it - so it fails here, in the fast
tier, where the refactor lands."""
import os

from tests import mutants

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_every_mutant_applies_to_the_source():
    stale = {m.name: why for m in mutants.MUTANTS if (why := mutants.check_applies(m, ROOT))}
    assert len(mutants.MUTANTS) > 50
    assert not stale, stale


def test_every_mutants_tests_exist():
    """The test files (and the functions named) that catch each mutant are
    where the mutant says: a moved test file makes its mutant untested."""
    missing = []
    for m in mutants.MUTANTS:
        for node in m.tests:
            path, _, func = node.split(" ")[0].partition("::")
            if not os.path.exists(os.path.join(ROOT, path)):
                missing.append(f"{m.name}: {path}")
            elif func and f"def {func.split('[')[0]}(" not in open(os.path.join(ROOT, path)).read():
                missing.append(f"{m.name}: {node}")
    assert not missing, missing
