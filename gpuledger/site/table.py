"""The site file's building blocks, below every part that reads a table of it: the error every
problem raises (``SiteError``: the file, the key, "expected …, found …") and ``SiteTable``, one TOML
table being read, whose unread keys are errors. ``gpuledger/site/__init__.py`` and the parsers
beside it (``engine.py``, ``dra.py``, ``alerts.py``; ``gpuledger/export/focus.py``) import these;
nothing here imports them."""

from pathlib import Path

DEFAULT_CONFIG = Path("gpuledger.toml")
# Kubernetes resource names counted as GPUs in Kueue Workloads and quota metrics.
DEFAULT_GPU_RESOURCES = ("nvidia.com/gpu",)


class SiteError(ValueError):
    """A site file that cannot be used; the message names the file and the key."""


class SiteTable:
    """One TOML table being read: every read key is remembered, the rest are errors."""

    def __init__(self, path: Path, where: str, data: object) -> None:
        self.path, self.where = path, where
        if not isinstance(data, dict):
            self.fail("", "a table", data)
        self.data: dict = data
        self.seen: set[str] = set()

    def fail(self, key: str, expected: str, found: object) -> None:
        name = f"{self.where}.{key}" if key else self.where
        msg = f"{self.path}: [{name}]: expected {expected}, found {found!r}"
        raise SiteError(msg)

    def get(self, key: str, kind: type | tuple[type, ...], default: object, what: str) -> object:
        self.seen.add(key)
        if key not in self.data:
            return default
        value = self.data[key]
        if isinstance(value, bool) and kind in (int, float, (int, float)):
            self.fail(key, what, value)
        if not isinstance(value, kind):
            self.fail(key, what, value)
        return value

    def text(self, key: str, default: str = "") -> str:
        return str(self.get(key, str, default, "a string"))

    def number(self, key: str, default: float, *, minimum: float = 0.0) -> float:
        value = float(self.get(key, (int, float), default, "a number"))  # type: ignore[arg-type]
        if value < minimum:
            self.fail(key, f"a number of at least {minimum:g}", value)
        return value

    def flag(self, key: str, default: bool) -> bool:
        return bool(self.get(key, bool, default, "true or false"))

    def file(self, key: str) -> Path | None:
        value = self.text(key)
        if not value:
            return None
        path = Path(value).expanduser()
        return path if path.is_absolute() else (self.path.parent / path)

    def strings(self, key: str, what: str) -> dict[str, str]:
        value = self.get(key, dict, {}, what)
        if not all(isinstance(k, str) and isinstance(v, str) and v.strip()
                   for k, v in value.items()):  # type: ignore[union-attr]
            self.fail(key, what, value)
        return dict(value)  # type: ignore[arg-type]

    def sub(self, key: str) -> "SiteTable | None":
        self.seen.add(key)
        if key not in self.data:
            return None
        return SiteTable(self.path, f"{self.where}.{key}", self.data[key])

    def done(self) -> None:
        unknown = sorted(set(self.data) - self.seen)
        if unknown:
            msg = (
                f"{self.path}: [{self.where}]: expected only the keys "
                            f"{sorted(self.seen)}, found {unknown[0]!r}"
            )
            raise SiteError(msg)
