"""``[gpuledger.engine]``: where the heavy models run, DuckDB (default) or Spark (docs/spark.md).

Read with the site file's own table reader; every problem names the file, the line of the key (or
of the table, for a missing key) and the key, "expected …, found …". :func:`open_engine` gives the
``models.engines.Engine`` the build functions take: the DuckDB engine for ``kind = "duckdb"``
(pyspark never imported), else a Spark session on ``master`` wrapped in a ``SparkEngine``, stopped
when the block ends.
"""

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuledger.site.table import SiteError

if TYPE_CHECKING:
    from gpuledger.site import Site
    from models.engines import Engine
    from models.engines.spark_session import SparkSettings

ENGINE_KINDS = ("duckdb", "spark")
ENGINE_KEYS = ("kind", "master", "scratch", "driver_memory", "executor_memory",
               "shuffle_partitions", "driver_host", "conf")
# the address the executors reach the driver at: a host name or an IPv4 address
HOST = re.compile(r"[A-Za-z0-9]([A-Za-z0-9.\-]*[A-Za-z0-9])?")


@dataclass(frozen=True)
class EngineSite:
    kind: str = "duckdb"
    master: str = ""  # spark://host:port or local[N]; required for kind = "spark"
    scratch: Path | None = None  # None: <ledger dir>/<ledger stem>.spark
    driver_memory: str = "2g"
    executor_memory: str = "2g"
    shuffle_partitions: int = 8
    driver_host: str = "127.0.0.1"
    conf: dict[str, str] = field(default_factory=dict)  # [gpuledger.engine.conf]: spark.* keys

    def scratch_for(self, db: Path) -> Path:
        """The scratch folder: ``scratch``, else beside the ledger ``db``."""
        return self.scratch if self.scratch is not None else db.parent / f"{db.stem}.spark"


def key_line(path: Path, table: str, key: str | None) -> int | None:
    """The line of ``key`` in the TOML table ``[table]`` of ``path`` (of the table's header when
    ``key`` is None or absent), or None. A key written dotted (``engine.kind = …`` under
    ``[gpuledger]``) is found too."""
    try:
        lines = path.read_text("utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    parent, _, last = table.rpartition(".")
    current, header = "", None
    for number, raw in enumerate(lines, 1):
        line = raw.split("#", 1)[0].strip()
        if line.startswith("["):
            current = line.strip("[] ").replace(" ", "")
            if current == table:
                header = number
            continue
        name = line.split("=", 1)[0].strip().replace(" ", "").replace('"', "")
        if "=" not in line or key is None:
            continue
        if (current == table and name == key) or (current == parent and name == f"{last}.{key}"):
            return number
    return header


def _fail(t: Any, key: str, expected: str, found: object, *, table: bool = False) -> None:
    line = key_line(t.path, t.where, key)
    where = f"{t.path}:{line}" if line else f"{t.path}"
    name = t.where if table else f"{t.where}.{key}"
    msg = f"{where}: [{name}]: expected {expected}, found {found!r}"
    raise SiteError(msg)


def parse_engine(t: Any | None) -> EngineSite:
    """``[gpuledger.engine]`` (a ``gpuledger.site.table.SiteTable`` or None) -> ``EngineSite``."""
    if t is None:
        return EngineSite()
    from models.engines.spark_session import MEMORY, master_problem
    for key in t.data:
        if key not in ENGINE_KEYS:
            _fail(t, key, f"only the keys {sorted(ENGINE_KEYS)}", key, table=True)
    for key in ("kind", "master", "scratch", "driver_memory", "executor_memory", "driver_host"):
        if key in t.data and not isinstance(t.data[key], str):
            _fail(t, key, "a string", t.data[key])
    kind = t.text("kind", "duckdb")
    if kind not in ENGINE_KINDS:
        _fail(t, "kind", f"one of {list(ENGINE_KINDS)}", kind)
    master = t.text("master").strip()
    if kind == "spark" and not master:
        _fail(t, "master", "the Spark master URL, spark://host:port or local[N], when "
              "kind = \"spark\"", None)
    if master and master_problem(master):
        _fail(t, "master", "spark://host:port (a standalone cluster) or local[N]", master)
    memory = {}
    for key in ("driver_memory", "executor_memory"):
        memory[key] = t.text(key, "2g")
        if not MEMORY.fullmatch(memory[key]):
            _fail(t, key, "a size with a unit, such as 512m or 2g", memory[key])
    partitions = t.data.get("shuffle_partitions", 8)
    t.seen.add("shuffle_partitions")
    if isinstance(partitions, bool) or not isinstance(partitions, int) or partitions < 1:
        _fail(t, "shuffle_partitions", "a whole number of at least 1", partitions)
    host = t.text("driver_host", "127.0.0.1")
    if not HOST.fullmatch(host):
        _fail(t, "driver_host", "a host name or an IP address the executors can reach", host)
    conf = t.data.get("conf", {})
    t.seen.add("conf")
    if not isinstance(conf, dict) or not all(
            isinstance(k, str) and k.startswith("spark.") and isinstance(v, str | int | float)
            and not isinstance(v, bool) for k, v in conf.items()):
        _fail(t, "conf", "a table of spark.* settings, such as \"spark.sql.ansi.enabled\" = "
              "\"true\"", conf)
    if "spark.master" in conf:
        _fail(t, "conf", "the master in master, not in conf", conf["spark.master"])
    site = EngineSite(kind=kind, master=master, scratch=t.file("scratch"), **memory,
                      shuffle_partitions=partitions, driver_host=host,
                      conf={k: str(v) for k, v in conf.items()})
    t.done()
    return site


def spark_settings(site: "Site", db: Path | None = None) -> "SparkSettings":
    """The Spark session settings of a site with ``kind = "spark"`` (pyspark not imported);
    ``db``: the ledger in use when a flag overrides the site's (the default scratch is beside
    it)."""
    from models.engines.spark_session import SparkSettings
    e = site.engine
    return SparkSettings(master=e.master, scratch=e.scratch_for(db or site.db),
                         driver_memory=e.driver_memory, executor_memory=e.executor_memory,
                         shuffle_partitions=e.shuffle_partitions, driver_host=e.driver_host,
                         conf=dict(e.conf))


@contextmanager
def open_engine(site: "Site | None", db: Path | None = None) -> Iterator["Engine"]:
    """The engine of ``site`` (DuckDB without a site or with ``kind = "duckdb"``) for the ledger
    ``db`` (default: the site's); a Spark session opened for it is stopped when the block ends."""
    from models.engines import DUCKDB_ENGINE
    if site is None or site.engine.kind == "duckdb":
        yield DUCKDB_ENGINE
        return
    from models.engines.spark import SparkEngine
    from models.engines.spark_session import spark_session
    settings = spark_settings(site, db)
    with spark_session(settings) as session:
        yield SparkEngine(session, settings.scratch)
