"""Exact arithmetic against Python's int and fractions.Fraction, as an independent reference.

Operands are drawn on both sides of the sizes from which Purple runs a GMP call on a worker
thread (interp/limits/gmp_worker.hpp: 2^17 bits for gcds and rationals, 2^21 for the rest), so both
paths are checked: small numbers, fixnum edges, 100-bit, 150,000-bit and (for the linear and
multiplicative operations only, where CPython stays fast) 2.2-million-bit integers, rationals
of 80,000-bit parts, and flonums compared exactly. Big literals are written in hexadecimal, which CPython
converts in linear time.

    python3 tests/interop/exact_arithmetic.py build/purple
"""
import math
import random
import subprocess
import sys
from fractions import Fraction

sys.set_int_max_str_digits(0)
random.seed(20261124)


def integer(bits):
    return random.choice([-1, 1]) * (random.getrandbits(bits) | (1 << (bits - 1)))


def small_integer():
    return random.choice([0, 1, -1, 7, 2**61 - 1, 2**61, -(2**61), 2**62, 2**63, random.randint(-99, 99)])


def rational(bits):
    return Fraction(integer(bits), abs(integer(bits)))


def operand(size):
    if size == "small":
        return random.choice([Fraction(small_integer()), Fraction(random.randint(-9, 9), random.randint(1, 12))])
    # Rationals of 80,000-bit parts: the operations' sizes (the sum over both operands) pass 2^17.
    bits = {"100": 100, "gcd": 80_000}[size]
    return random.choice([Fraction(integer(bits)), rational(bits)])


def lit(v):
    """A Purple literal for an int, Fraction or float."""
    if isinstance(v, float):
        return repr(v)
    v = Fraction(v)
    sign = "-" if v < 0 else ""
    n, d = abs(v.numerator), v.denominator
    return f"#x{sign}{n:x}" + ("" if d == 1 else f"/{d:x}")


def answer(v):
    if isinstance(v, bool):
        return "#t" if v else "#f"
    return lit(v)


cases = []   # (Purple expression, expected printed result)
for _ in range(160):
    size = random.choice(["small", "100", "gcd", "gcd"])
    a, b = operand(size), operand(random.choice([size, "small"]))
    op = random.choice(["+", "-", "*", "/", "<", "=", "floor", "round", "max"])
    if op == "/" and b == 0:
        b = Fraction(3, 7)
    expected = {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b,
                "<": lambda: a < b, "=": lambda: a == b, "floor": lambda: Fraction(math.floor(a)),
                "round": lambda: Fraction(round(a)), "max": lambda: max(a, b)}[op]()
    args = f"{lit(a)}" if op in ("floor", "round") else f"{lit(a)} {lit(b)}"
    cases.append((f"({op} {args})", answer(expected)))
    if random.random() < 0.2:   # the same value on both sides
        cases.append((f"(= {lit(a)} {lit(Fraction(a.numerator, a.denominator))})", "#t"))

for _ in range(40):   # integer operations with gcds and divisions, past 2^17 bits
    x, y = integer(150_000), integer(random.choice([64, 1000, 140_000]))
    op = random.choice(["gcd", "quotient", "remainder", "modulo", "sqrt"])
    if op == "gcd":
        g = integer(random.choice([10, 5000]))
        cases.append((f"(gcd {lit(x * g)} {lit(y * g)})", answer(math.gcd(x * g, y * g))))
    elif op == "sqrt":
        cases.append((f"(exact-integer-sqrt {lit(abs(x))})", answer(math.isqrt(abs(x)))))
    else:
        q = abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)   # truncating, as Scheme's quotient
        r = x - q * y
        m = x % y   # Python's % takes the divisor's sign, as modulo does
        cases.append((f"({op} {lit(x)} {lit(y)})", answer({"quotient": q, "remainder": r, "modulo": m}[op])))

for _ in range(30):   # past 2^21 bits: linear and multiplicative operations, exact comparisons with flonums
    x, y = integer(2_200_000), integer(random.choice([2_200_000, 100]))
    op = random.choice(["+", "-", "*", "<", "="])
    expected = {"+": x + y, "-": x - y, "*": x * y, "<": x < y, "=": x == y}[op]
    cases.append((f"({op} {lit(x)} {lit(y)})", answer(expected)))
for _ in range(60):
    x = random.choice([integer(random.choice([53, 54, 1000, 2_200_000])), 2**53 + random.choice([-1, 0, 1]),
                       rational(80_000)])
    f = random.choice([2.0**53, 2.0**53 + 2, -1.5e300, 1e-300, 12345.678, float(2**1000), -0.5, 0.0])
    x, f = (x, f) if random.random() < 0.5 else (f, x)
    cases.append((f"(< {lit(x)} {lit(f)})", answer(Fraction(x) < Fraction(f))))
    cases.append((f"(= {lit(x)} {lit(f)})", answer(Fraction(x) == Fraction(f))))

# Purple prints in decimal: ask it to print the hexadecimal form of exact results.
program = """
(define (hex v)
  (cond ((boolean? v) v)
        ((and (exact? v) (integer? v)) (string-append (if (< v 0) "#x-" "#x") (number->string (abs v) 16)))
        ((exact? v) (string-append (if (< v 0) "#x-" "#x") (number->string (abs (numerator v)) 16)
                                   "/" (number->string (denominator v) 16)))
        (else v)))
(define (show v) (let ((h (hex v))) (if (string? h) (display h) (write h))) (newline))
""" + "\n".join(f"(show {e})" for e, _ in cases) + "\n"
# exact-integer-sqrt returns two values; keep the root.
program = program.replace("(show (exact-integer-sqrt", "(show (call-with-values (lambda () (exact-integer-sqrt")
program = "\n".join(line + " (lambda (s r) s)))" if "(exact-integer-sqrt" in line else line
                    for line in program.split("\n"))
path = "/tmp/purple-exact-arithmetic-%d.purple" % random.getrandbits(32)
with open(path, "w") as f:
    f.write(program)
try:
    run = subprocess.run([sys.argv[1], path], capture_output=True, text=True, timeout=600)
finally:
    import os
    os.unlink(path)
got = run.stdout.split("\n")
bad = [(e, want, g) for (e, want), g in zip(cases, got) if want != g]
if len(got) < len(cases):
    bad.append(("(output ended early)", len(cases), len(got)))
print(f"{len(cases)} results checked against Python; {len(bad)} differ")
for e, want, g in bad[:5]:
    print("  ", e[:120], "->", str(g)[:80], "want", str(want)[:80])
if run.returncode != 0 or bad:
    print(run.stderr[:2000])
    sys.exit(1)
