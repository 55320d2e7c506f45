"""Named checks for the Python test drivers (kernel, plot, tensorboard): each prints ok/FAIL
as it goes, so a CTest log shows every result, and `finish()` exits 1 if any failed."""
import sys

failures = []


def check(name, ok, detail=""):
    if ok:
        print(f"ok: {name}")
    else:
        failures.append(name)
        print(f"FAIL: {name}: {detail}")


def finish():
    print(f"{len(failures)} failed")
    sys.exit(1 if failures else 0)
