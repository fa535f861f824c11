"""Sizes as users write and read them: ``"500M"`` in, ``"1.2 GiB"`` out."""

from __future__ import annotations

import argparse
import math
import re

from .errors import BadArgument

_SIZE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*([kmgt]?i?b?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
# What argparse takes for a negative number rather than an option (its own test, ``-5``, ``-.5``), and sizes.
_NEGATIVE = re.compile(r"^-\d+$|^-\d*\.\d+$|^-\d+(?:\.\d+)?\s*[kmgt]?i?b?$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """``"500M"``, ``"2GiB"``, ``"1024"`` -> bytes."""
    m = _SIZE.match(text)
    if not m:
        raise BadArgument(f"{text!r} is not a size (try 500M or 2G)")
    if m.group(1).startswith("-") and float(m.group(1)):
        raise BadArgument(f"{text.strip()!r} is a negative size: give 0 or more (try 500M or 2G)")
    size = float(m.group(1)) * _UNITS[m.group(2)[:1].lower()]
    if not math.isfinite(size):  # 400 nines: "cannot convert float infinity to integer", a traceback
        raise BadArgument(f"{text.strip()!r} is too large a size (try 500M or 2G)")
    return int(size)


def read_negative_sizes(parser: argparse.ArgumentParser) -> None:
    """Have ``parser`` read ``-5G`` as the value of an option, as it reads ``-5``, for ``parse_size`` to refuse as
    a negative size: it was taken for an option (``--max-size -5G``: "expected one argument")."""
    parser._negative_number_matcher = _NEGATIVE  # argparse's own test, widened


def human_bytes(n: int | None) -> str:
    if n is None or n < 0:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"
