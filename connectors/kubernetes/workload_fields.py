"""Typed reads of a Kubernetes object's JSON fields, each failure naming its JSON path.

A snapshot item is read through these accessors only, so a field that is null, missing where
the API always writes it, or of the wrong type stops the item with a ``BadField`` that says
where (``spec.podSets[0].count``) and what ("expected an integer, found a string '2x'"); the
caller keeps it as a reject and goes on with the next item. Fields the API may leave out are
``required=False``: absent is fine, but present-and-null is not (the API server never writes
null for them, so a null means the file was altered on the way and its meaning is unknown).
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any, Literal, overload

JsonObject = dict[str, Any]  # an object of a Kubernetes API document, as json.loads gives it
# Kubernetes quantity suffixes (resource.Quantity): binary, decimal SI, and milli.
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DECIMAL = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}


class BadField(ValueError):
    """A field that cannot be read: ``path`` (JSON path) and ``reason`` ("expected …, found …")."""

    def __init__(self, path: str, expected: str, value: object, *, present: bool = True) -> None:
        self.path = path
        self.reason = f"expected {expected}, found {describe(value) if present else 'none'}"
        super().__init__(f"{path}: {self.reason}")


def describe(value: object) -> str:
    """A short description of a JSON value for a reject reason."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"a number {value!r}"
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:37] + "..."
        return f"a string {text!r}"
    if isinstance(value, list):
        return f"an array of {len(value)}"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    if not _PLAIN.fullmatch(key):  # a resource name such as nvidia.com/gpu
        return f'{path}["{key}"]'
    return f"{path}.{key}" if path else key


def _get(parent: JsonObject, key: str, path: str, expected: str, required: bool) -> object:
    where = join(path, key)
    if key not in parent:
        if required:
            raise BadField(where, expected, None, present=False)
        return None
    value = parent[key]
    if value is None:
        raise BadField(where, expected if required else f"{expected} or no field", None)
    return value


@overload
def obj(parent: JsonObject, key: str, path: str, *, required: Literal[True]) -> JsonObject: ...
@overload
def obj(parent: JsonObject, key: str, path: str, *,
        required: bool = False) -> JsonObject | None: ...
def obj(parent: JsonObject, key: str, path: str, *, required: bool = False) -> JsonObject | None:
    value = _get(parent, key, path, "an object", required)
    if value is not None and not isinstance(value, dict):
        raise BadField(join(path, key), "an object", value)
    return value


def array(parent: JsonObject, key: str, path: str, *, required: bool = False) -> list[Any] | None:
    value = _get(parent, key, path, "an array", required)
    if value is not None and not isinstance(value, list):
        raise BadField(join(path, key), "an array", value)
    return value


def objects(parent: JsonObject, key: str, path: str, *, required: bool = False) -> list[JsonObject]:
    """An array of objects (empty when the optional array is absent)."""
    items = array(parent, key, path, required=required) or []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise BadField(join(join(path, key), i), "an object", item)
    return items


@overload
def string(parent: JsonObject, key: str, path: str, *, required: Literal[True],
           nonempty: bool = False) -> str: ...
@overload
def string(parent: JsonObject, key: str, path: str, *, required: bool = False,
           nonempty: bool = False) -> str | None: ...
def string(parent: JsonObject, key: str, path: str, *, required: bool = False,
           nonempty: bool = False) -> str | None:
    expected = "a non-empty string" if nonempty else "a string"
    value = _get(parent, key, path, expected, required)
    if value is not None and (not isinstance(value, str) or (nonempty and not value)):
        raise BadField(join(path, key), expected, value)
    return value


@overload
def integer(parent: JsonObject, key: str, path: str, *, required: Literal[True],
            minimum: int | None = None) -> int: ...
@overload
def integer(parent: JsonObject, key: str, path: str, *, required: bool = False,
            minimum: int | None = None) -> int | None: ...
def integer(parent: JsonObject, key: str, path: str, *, required: bool = False,
            minimum: int | None = None) -> int | None:
    expected = "an integer" if minimum is None else f"an integer >= {minimum}"
    value = _get(parent, key, path, expected, required)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (
            isinstance(value, float) and not value.is_integer()):
        raise BadField(join(path, key), expected, value)
    number = int(value)
    if minimum is not None and number < minimum:
        raise BadField(join(path, key), expected, value)
    return number


@overload
def boolean(parent: JsonObject, key: str, path: str, *, required: Literal[True]) -> bool: ...
@overload
def boolean(parent: JsonObject, key: str, path: str, *, required: bool = False) -> bool | None: ...
def boolean(parent: JsonObject, key: str, path: str, *, required: bool = False) -> bool | None:
    value = _get(parent, key, path, "a boolean", required)
    if value is not None and not isinstance(value, bool):
        raise BadField(join(path, key), "a boolean", value)
    return value


@overload
def timestamp(parent: JsonObject, key: str, path: str, *, required: Literal[True]) -> datetime: ...
@overload
def timestamp(parent: JsonObject, key: str, path: str, *,
              required: bool = False) -> datetime | None: ...
def timestamp(parent: JsonObject, key: str, path: str, *,
              required: bool = False) -> datetime | None:
    """An RFC 3339 time (``2024-03-19T20:49:17Z``) as naive UTC."""
    expected = "an RFC 3339 time"
    text = string(parent, key, path, required=required)
    if text is None:
        return None
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise BadField(join(path, key), expected, text) from None
    if value.tzinfo is None:  # RFC 3339 always carries the zone; a naive time is ambiguous
        raise BadField(join(path, key), f"{expected} with a zone", text)
    return value.astimezone(UTC).replace(tzinfo=None)


def parse_quantity(value: object) -> Decimal | None:
    """A Kubernetes quantity ("2", 2, "1k", "500m", "1Gi", "1e3") as a Decimal; None if not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return Decimal(str(value)) if math.isfinite(value) else None
    if not isinstance(value, str):
        return None
    text = value.strip()
    factor = Decimal(1)
    suffix = next((s for s in (*_BINARY, *_DECIMAL) if text.endswith(s)), None)
    if suffix is not None:
        text, factor = text[: -len(suffix)], Decimal({**_BINARY, **_DECIMAL}[suffix])
    elif text.endswith("m"):
        text, factor = text[:-1], Decimal("0.001")
    try:
        number = Decimal(text) * factor
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


def count_quantity(parent: JsonObject, key: str, path: str) -> int | None:
    """A device count: a quantity that is a whole number >= 0 (GPUs cannot be split)."""
    if key not in parent:
        return None
    value = parent[key]
    number = parse_quantity(value)
    if number is None or number < 0 or number != number.to_integral_value():
        raise BadField(join(path, key), "a whole number of devices", value)
    return int(number)
