"""Kubernetes resource quantities (`16Gi`, `500m`, `2`) as numbers, read by Kubernetes' own grammar.

`parse_quantity` is a port of apimachinery's `resource.ParseQuantity` (pkg/api/resource/quantity.go at v0.34.1, the
apimachinery of the Kubernetes 1.34 this platform defaults to): what it refuses raises `ValueError`, and the config
step reports it with its key path before anything is registered (`stack_config.rules`, `stack_config.consumers`).
"""

from __future__ import annotations

import math
from fractions import Fraction

# quantity.go:40-58, the serialization format:
#   <quantity> ::= <signedNumber><suffix>;  <number> ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
#   <suffix> ::= <binarySI> | <decimalExponent> | <decimalSI>;  <decimalExponent> ::= "e" <signedNumber> | "E" ...
# and suffix.go:108-135 (newSuffixer), which also takes n and u: suffix → (base, exponent).
_DECIMAL_SI = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SI = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_SUFFIX_CHARS = "eEinumkKMGTP"  # quantity.go:247
_DIGITS = "0123456789"
_MAX_INT64_FACTORS = 18  # quantity.go (maxInt64Factors): decimal digits an int64 always holds
_MAX_ALLOWED = (1 << 63) - 1  # amount.go maxAllowed: BinarySI quantities are capped here (quantity.go:378-380)
_NANO = Fraction(1, 10**9)
GRAMMAR = ("a number (like 8, 1.5 or .5, optionally signed and with a decimal exponent e3) and one suffix: "
           "Ki, Mi, Gi, Ti, Pi, Ei (powers of 1024) or n, u, m, k, M, G, T, P, E (powers of 1000), or none")
"""What Kubernetes takes, for messages."""


def _scan(text: str) -> tuple[bool, str, str, str, str]:
    """quantity.go:160-274 `parseQuantityString`: sign, the numeric part as written, numerator, denominator,
    suffix; `ValueError` where the suffix has characters after its exponent."""
    positive, pos, end = True, 0, len(text)
    if pos < end and text[0] in "+-":  # :165-174
        positive, pos = text[0] != "-", 1
    while pos < end and text[pos] == "0":  # :176-190 leading zeros; all zeros is 0
        pos += 1
    if pos >= end:
        return positive, "0", "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:  # :192-207
        pos += 1
    if pos >= end:
        return positive, text, text[start:], "", ""
    numerator = text[start:pos] or "0"  # :209-212
    denominator = ""
    if text[pos] == ".":  # :214-237 (`1.` is allowed: upstream's TODO)
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denominator = text[start:pos]
        if pos >= end:
            return positive, text, numerator, denominator, ""
    value = text[:pos]  # :238
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:  # :241-251
        pos += 1
    if pos < end and text[pos] in "+-":  # :252-257
        pos += 1
    while pos < end and text[pos] in _DIGITS:  # :258-269
        pos += 1
    if pos < end:  # :270-273
        raise ValueError("quantities must match the regular expression "
                         "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
    return positive, value, numerator, denominator, text[suffix_start:]


def _suffix(suffix: str) -> tuple[int, int, str]:
    """suffix.go:88-106 and :180-198 (`interpret`): base, exponent and format of a suffix."""
    if suffix in _DECIMAL_SI:
        return 10, _DECIMAL_SI[suffix], "DecimalSI"
    if suffix in _BINARY_SI:
        return 2, _BINARY_SI[suffix], "BinarySI"
    if len(suffix) > 1 and suffix[0] in "eE":
        exponent = suffix[1:]
        body = exponent[1:] if exponent[:1] in "+-" else exponent
        if body and all(char in _DIGITS for char in body):  # strconv.ParseInt(s, 10, 64)
            parsed = int(exponent)
            if -(1 << 63) <= parsed < 1 << 63:
                return 10, (parsed + (1 << 31)) % (1 << 32) - (1 << 31), "DecimalExponent"  # int32(parsed)
    raise ValueError("unable to parse quantity's suffix")


def parse_quantity(text: str) -> Fraction:
    """The amount of a Kubernetes quantity (`resource.ParseQuantity`, quantity.go:277-391): bytes for memory and
    storage, cores for cpu. Non-zero amounts round up (away from zero) to 1n, BinarySI ones are capped at 2^63-1,
    as upstream. `ValueError` for what Kubernetes refuses (`1 Gi`, `1gi`, `64GB`, `1.2.3`)."""
    text = str(text)
    if text == "":
        raise ValueError("quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'")
    if text == "0":
        return Fraction(0)
    positive, value, numerator, denominator, suffix = _scan(text)
    base, exponent, form = _suffix(suffix)
    # :295-345 the int64 fast path; where it doesn't apply, inf.Dec's SetString parses `value`, which needs a digit
    # (gopkg.in/inf.v0 dec.go `scan`: "no digits read"), so e.g. `.e-10` is refused while `.e-9` is 0.
    if form == "BinarySI":
        precision = (15 - len(numerator) - int(exponent * 3 / 10) - 1) if not denominator else -1
        scale = 0
    else:
        precision = _MAX_INT64_FACTORS - len(numerator + denominator)
        scale = exponent
    fast = precision >= 0 and scale - len(denominator) >= -9
    if not fast and not any(char in _DIGITS for char in value):
        raise ValueError("unable to parse numeric part of quantity")
    # An exponent beyond ±64 makes an amount beyond any node (or below 1n, which rounds up to 1n) either way; the
    # clamp keeps 10**2147483647 from being computed.
    amount = (Fraction(int(numerator + denominator), 10 ** len(denominator))
              * Fraction(base) ** max(-64, min(64, exponent)))
    if amount:
        amount = math.ceil(amount / _NANO) * _NANO  # :368-374 inf.RoundUp to Nano
    if form == "BinarySI" and amount > _MAX_ALLOWED:
        amount = Fraction(_MAX_ALLOWED)
    return amount if positive else -amount


def quantity_unit(text: str) -> str:
    """The suffix of a quantity Kubernetes takes ('' for a bare number, `e3` for an exponent)."""
    return _scan(str(text))[4]


def quantity_gib(quantity: str) -> float:
    """A Kubernetes memory quantity in GiB ("16Gi" → 16.0, "512Mi" → 0.5)."""
    try:
        return float(parse_quantity(quantity) / 2**30)
    except ValueError:
        raise ValueError(f"{quantity!r} is not a memory quantity like '16Gi' or '512Mi' (Kubernetes takes {GRAMMAR}, "
                         "which means bytes)") from None


def cpu_cores(cpu: str) -> float:
    """A CPU quantity in cores ("500m" → 0.5, "8" → 8.0)."""
    try:
        return float(parse_quantity(cpu))
    except ValueError:
        raise ValueError(f"{cpu!r} is not a CPU quantity like '8', '7.5' or '500m' (cores, or millicores with 'm'; "
                         f"Kubernetes takes {GRAMMAR})") from None


def whole_cores(cpu: str) -> int:
    """A CPU quantity rounded up to whole cores."""
    return math.ceil(cpu_cores(cpu))
