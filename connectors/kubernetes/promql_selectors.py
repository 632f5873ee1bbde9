"""PromQL vector selectors as the OpenMetrics file source answers them: ``name``,
``name{l="v", l!="v", l=~"re", l!~"re"}`` and ``{__name__=~"re", ...}``; regexes fully anchored
as in PromQL, a missing label matches ``""``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

_SELECTOR = re.compile(r"^\s*(?:[A-Za-z_:][A-Za-z0-9_:]*\s*(?:\{.*\})?|\{.*\})\s*$", re.DOTALL)
_ONE_MATCHER = (r"""\s*[A-Za-z_][A-Za-z0-9_]*\s*(?:=~|!~|!=|=)\s*"""  # label, operator,
                r"""(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')\s*""")  # quoted value
_MATCHER_LIST = re.compile(f"{_ONE_MATCHER}(?:,{_ONE_MATCHER})*")
METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_MATCHER = re.compile(
    r"""\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*(?:"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)')\s*,?"""
)
_UNESCAPE = re.compile(r"\\(.)")


def unescape(text: str) -> str:
    """A label value as written between quotes, its escapes (``\\n``, ``\\"``, ``\\\\``) read."""
    if "\\" not in text:
        return text
    return _UNESCAPE.sub(lambda m: "\n" if m.group(1) == "n" else m.group(1), text)


def check_selector(selector: str) -> str:
    """`selector` stripped, if it is a plain vector selector (a range is appended to it)."""
    if not _SELECTOR.match(selector) or "[" in selector.rsplit("}", 1)[-1]:
        msg = f"expected a vector selector like name{{label=\"v\"}}, found {selector!r}"
        raise ValueError(msg)
    return selector.strip()


def check_matchers(matchers: str) -> str:
    """`matchers` (label matchers without braces, such as ``cluster="a"``) stripped, if they are
    matchers a vector selector can hold; "" stays ""."""
    text = matchers.strip().strip(",").strip()
    if text and _MATCHER_LIST.fullmatch(text) is None:
        msg = f"expected label matchers without braces such as cluster=\"a\", found {matchers!r}"
        raise ValueError(msg)
    return text


def add_matchers(selector: str, matchers: str) -> str:
    """`selector` with `matchers` added inside its braces: ``m{x="y"}`` -> ``m{x="y",cluster="a"}``,
    ``m`` -> ``m{cluster="a"}``; with no matchers, `selector` as checked."""
    selector = check_selector(selector)
    if not matchers:
        return selector
    if not selector.endswith("}"):
        return f"{selector}{{{matchers}}}"
    name, _, inner = selector[:-1].partition("{")  # metric names hold no brace
    inner = inner.strip().rstrip(",").strip()  # a trailing comma is legal PromQL
    return f"{name}{{{inner},{matchers}}}" if inner else f"{name}{{{matchers}}}"


@dataclass(frozen=True)
class Matcher:
    label: str
    op: str  # = != =~ !~
    value: str

    def matches(self, labels: dict[str, str]) -> bool:
        have = labels.get(self.label, "")
        if self.op == "=":
            return have == self.value
        if self.op == "!=":
            return have != self.value
        literals = self._literals
        if literals is not None:  # uid=~"a|b|…": a set lookup, not a 4 KB regex per series
            hit = have in literals
        else:
            hit = self._pattern.fullmatch(have) is not None
        return hit if self.op == "=~" else not hit

    @cached_property
    def _literals(self) -> frozenset[str] | None:
        values = literal_values(Matcher(self.label, "=~", self.value))
        return frozenset(values) if values is not None else None

    @cached_property
    def _pattern(self) -> re.Pattern[str]:
        return re.compile(self.value)


def parse_selector(selector: str) -> list[Matcher]:
    """PromQL vector selector -> matchers (the metric name becomes ``__name__ = name``)."""
    text = check_selector(selector)
    matchers: list[Matcher] = []
    name = METRIC_NAME.match(text)
    rest = text
    if name:
        matchers.append(Matcher("__name__", "=", name.group(0)))
        rest = text[name.end():].strip()
    if rest:
        if not (rest.startswith("{") and rest.endswith("}")):
            msg = f"expected {{matchers}} after the metric name, found {rest!r}"
            raise ValueError(msg)
        body = rest[1:-1]
        pos = 0
        while pos < len(body):
            if not body[pos:].strip():
                break
            m = _MATCHER.match(body, pos)
            if m is None:
                msg = f"cannot parse the label matcher at {body[pos:]!r} in {selector!r}"
                raise ValueError(msg)
            raw = m.group(3) if m.group(3) is not None else m.group(4)
            matchers.append(Matcher(m.group(1), m.group(2), unescape(raw)))
            pos = m.end()
    if not matchers:
        msg = f"expected at least one matcher in {selector!r}"
        raise ValueError(msg)
    return matchers


_REGEX_META = frozenset(".^$*+?()[]{}|")


def literal_values(m: Matcher) -> list[str] | None:
    """The label values a matcher accepts when they are a finite list of non-empty literals
    (``l="v"``; ``l=~"a|b|c"``, punctuation escaped as ``\\.`` or ``\\-`` allowed), else None."""
    if m.op == "=":
        return [m.value] if m.value else None
    if m.op != "=~":
        return None
    out: list[str] = []
    current: list[str] = []
    chars = iter(m.value)
    for c in chars:
        if c == "\\":
            nxt = next(chars, "")
            if not nxt or nxt.isalnum():  # \d, \w …: a class, not a literal
                return None
            current.append(nxt)
        elif c == "|":
            if not current:
                return None
            out.append("".join(current))
            current = []
        elif c in _REGEX_META:
            return None
        else:
            current.append(c)
    if not current:
        return None
    out.append("".join(current))
    return out
