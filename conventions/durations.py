"""Durations as the programs that read them parse them: Prometheus (`model.ParseDuration`) and Go
(`time.ParseDuration`, which Kubernetes' `metav1.Duration` and so Kueue's configuration use).

Faithful ports, line by line, so that the config step refuses exactly what the consumer would refuse and the
platform computes with the value the consumer will use. Both return nanoseconds (int) and raise `ValueError` with
upstream's own error text. tests/test_config_consumers.py holds them to promtool and to Go.
"""

from __future__ import annotations

NANOSECONDS_PER_SECOND = 10**9
_INT64_MAX = (1 << 63) - 1

# prometheus/common model/time.go:187-200 at 7f8b2a0d32d3 (v0.65.1-0.20250703115700-7f8b2a0d32d3, the version
# Prometheus v3.6.0 pins in its go.mod; the prometheus chart 27.39.0 of catalog/versions.py runs v3.6.0):
# each unit's position (units must go from biggest to smallest) and its length in nanoseconds.
_PROMETHEUS_UNITS: dict[str, tuple[int, int]] = {
    "ms": (7, 10**6),
    "s": (6, NANOSECONDS_PER_SECOND),
    "m": (5, 60 * NANOSECONDS_PER_SECOND),
    "h": (4, 3600 * NANOSECONDS_PER_SECOND),
    "d": (3, 24 * 3600 * NANOSECONDS_PER_SECOND),
    "w": (2, 7 * 24 * 3600 * NANOSECONDS_PER_SECOND),
    "y": (1, 365 * 24 * 3600 * NANOSECONDS_PER_SECOND),
}
PROMETHEUS_UNITS = ", ".join(sorted(_PROMETHEUS_UNITS, key=lambda unit: _PROMETHEUS_UNITS[unit][0]))
"""The units, largest first: `y, w, d, h, m, s, ms`."""


def _isdigit(char: str) -> bool:
    return "0" <= char <= "9"  # model/time.go:185 and Go's ASCII tests: no other Unicode digits


def parse_prometheus_duration(text: str) -> int:
    """prometheus/common `model.ParseDuration` (model/time.go:205-259 at 7f8b2a0d32d3), in nanoseconds: digits and a
    unit, repeated, units y w d h m s ms each at most once and largest first; "0" alone without a unit; no sign, no
    fraction; at most 2^63-1 ns (about 292 years)."""
    if text == "0":  # :207-209
        return 0
    if text == "":  # :210-211
        raise ValueError("empty duration string")
    rest, total, last_position = text, 0, 0
    while rest:  # :218
        if not _isdigit(rest[0]):  # :219-221
            raise ValueError(f"not a valid duration string: {text!r}")
        end = 0
        while end < len(rest) and _isdigit(rest[end]):  # :223-225
            end += 1
        value = int(rest[:end])
        if value > (1 << 64) - 1:  # :226-229 strconv.ParseUint(s, 10, 0): out of uint64 range
            raise ValueError(f"not a valid duration string: {text!r}")
        rest = rest[end:]
        end = 0
        while end < len(rest) and not _isdigit(rest[end]):  # :233-234 the unit: everything up to the next digit
            end += 1
        if end == 0:  # :235-237 a number without a unit
            raise ValueError(f"not a valid duration string: {text!r}")
        unit, rest = rest[:end], rest[end:]
        if unit not in _PROMETHEUS_UNITS:  # :240-243
            raise ValueError(f"unknown unit {unit!r} in duration {text!r}")
        position, length = _PROMETHEUS_UNITS[unit]
        if position <= last_position:  # :244-246 units in order, each once
            raise ValueError(f"not a valid duration string: {text!r}")
        last_position = position
        if value > (1 << 63) // length:  # :248-251 overflows time.Duration
            raise ValueError("duration out of range")
        total += value * length
        if total > _INT64_MAX:  # :253-255
            raise ValueError("duration out of range")
    return total


# Go src/time/format.go:1615-1624 (go1.26.8, the toolchain here; the function is unchanged since Go 1.15's
# overflow fixes): the units of time.ParseDuration in nanoseconds.
_GO_UNITS: dict[str, int] = {
    "ns": 1, "us": 10**3, "µs": 10**3, "μs": 10**3,  # U+00B5 micro sign, U+03BC Greek mu
    "ms": 10**6, "s": NANOSECONDS_PER_SECOND, "m": 60 * NANOSECONDS_PER_SECOND, "h": 3600 * NANOSECONDS_PER_SECOND,
}
GO_UNITS = "h, m, s, ms, us, ns"
"""The units, largest first (`µs` is `us`)."""


def _go_leading_int(text: str) -> tuple[int, str]:
    """format.go:1554-1572 `leadingInt`: the leading digits; `ValueError` once they exceed 2^63."""
    value, index = 0, 0
    while index < len(text) and _isdigit(text[index]):
        if value > (1 << 63) // 10:
            raise ValueError("bad [0-9]*")
        value = value * 10 + int(text[index])
        if value > 1 << 63:
            raise ValueError("bad [0-9]*")
        index += 1
    return value, text[index:]


def _go_leading_fraction(text: str) -> tuple[int, float, str]:
    """format.go:1577-1603 `leadingFraction`: the leading digits as a numerator and its scale; it stops accumulating
    precision (never fails) on overflow."""
    value, scale, index, overflow = 0, 1.0, 0, False
    while index < len(text) and _isdigit(text[index]):
        if not overflow:
            if value > ((1 << 63) - 1) // 10:
                overflow = True
            else:
                following = value * 10 + int(text[index])
                if following > 1 << 63:
                    overflow = True
                else:
                    value, scale = following, scale * 10
        index += 1
    return value, scale, text[index:]


def parse_go_duration(text: str) -> int:
    """Go's `time.ParseDuration` (src/time/format.go:1631-1728 at go1.26.8), in nanoseconds: an optional sign, then
    decimal numbers (fractions allowed) each with a unit of ns us µs ms s m h, in any order; "0" alone without a
    unit; within ±2^63 ns (about 2562047 hours)."""
    rest, negative = text, False
    if rest and rest[0] in "-+":  # :1637-1644
        negative, rest = rest[0] == "-", rest[1:]
    if rest == "0":  # :1645-1648
        return 0
    if rest == "":  # :1649-1651
        raise ValueError(f"time: invalid duration {text!r}")
    total = 0
    while rest:  # :1652
        if not (rest[0] == "." or _isdigit(rest[0])):  # :1660-1663
            raise ValueError(f"time: invalid duration {text!r}")
        length_before = len(rest)
        try:
            whole, rest = _go_leading_int(rest)  # :1665-1669
        except ValueError:
            raise ValueError(f"time: invalid duration {text!r}") from None
        digits_before = length_before != len(rest)
        fraction, scale, digits_after = 0, 1.0, False
        if rest and rest[0] == ".":  # :1673-1679
            rest = rest[1:]
            length_before = len(rest)
            fraction, scale, rest = _go_leading_fraction(rest)
            digits_after = length_before != len(rest)
        if not digits_before and not digits_after:  # :1680-1683 e.g. ".s"
            raise ValueError(f"time: invalid duration {text!r}")
        end = 0
        while end < len(rest) and not (rest[end] == "." or _isdigit(rest[end])):  # :1686-1692
            end += 1
        if end == 0:  # :1693-1695
            raise ValueError(f"time: missing unit in duration {text!r}")
        unit, rest = rest[:end], rest[end:]
        if unit not in _GO_UNITS:  # :1698-1701
            raise ValueError(f"time: unknown unit {unit!r} in duration {text!r}")
        length = _GO_UNITS[unit]
        if whole > (1 << 63) // length:  # :1702-1705
            raise ValueError(f"time: invalid duration {text!r}")
        whole *= length
        if fraction > 0:  # :1707-1715 float64, as Go: nanosecond-exact for fractions of hours
            whole += int(float(fraction) * (float(length) / scale))
            if whole > 1 << 63:
                raise ValueError(f"time: invalid duration {text!r}")
        total = (total + whole) % (1 << 64)  # uint64 arithmetic: 2^63 + 2^63 wraps to 0, as in Go
        if total > 1 << 63:  # :1716-1719
            raise ValueError(f"time: invalid duration {text!r}")
    if negative:  # :1721-1723 (-2^63 is the one value beyond 2^63-1 that fits)
        return -total
    if total > _INT64_MAX:  # :1724-1726
        raise ValueError(f"time: invalid duration {text!r}")
    return total
