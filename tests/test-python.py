#!/usr/bin/env python3
"""The Python package's pytest suite (tests/python) on the build's
libsmelt.so, with one closing line that scripts/test-summary counts:
"test-python: N checks, F failed" (N: the tests that ran; skips are not
counted as passes and are reported apart).  Exit 77 (skipped) without
pytest or cffi."""
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
try:
    import cffi  # noqa: F401
    import pytest
except ImportError as e:
    if __name__ == "__main__":
        print("test-python: skipped (%s)" % e)
        sys.exit(77)
    raise


class Count:
    def __init__(self):
        self.passed = self.failed = self.skipped = 0

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or (report.when == "setup" and not report.passed):
            if report.skipped:
                self.skipped += 1
            elif report.passed:
                self.passed += 1
            else:
                self.failed += 1
        elif report.when == "teardown" and report.failed:
            self.failed += 1


def main():
    c = Count()
    rc = pytest.main(["-q", "-p", "no:cacheprovider", os.path.join(here, "python")] + sys.argv[1:], plugins=[c])
    if rc not in (0, 1) and c.failed == 0:
        c.failed = 1  # collection or usage error: the suite did not run
    print("test-python: %d checks, %d failed" % (c.passed + c.failed, c.failed))
    if c.skipped:
        print("test-python: %d tests skipped" % c.skipped)
    sys.exit(0 if c.failed == 0 and rc in (0, 5) else 1)


# the guard matters: the dask test's worker processes (spawned) import
# __main__ again, which must not run the suite in each of them
if __name__ == "__main__":
    main()
