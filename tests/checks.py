"""The check() counter of the Python end-to-end tests (test-cli, test-bench,
test-readme): each failed check is printed at once; done() prints the
summary line scripts/test counts ("test-NAME: N checks, F failed") and
exits 1 if any failed."""
import sys

failures = []
count = 0


def check(cond, what):
    global count
    count += 1
    if not cond:
        failures.append(what)
        print("FAIL: " + what)


def done(name):
    print("%s: %d checks, %d failed" % (name, count, len(failures)))
    sys.exit(1 if failures else 0)
