"""A Spark session for the Spark engine, from the site's ``[gpuledger.engine]`` (docs/spark.md).

:func:`spark_conf` is the one place the session's settings are decided; :func:`open_spark` builds
a ``SparkSession`` from it, and the Dagster resource hands the same dictionary to dagster-pyspark's
``PySparkResource``. pyspark is imported only when a session is opened: a site on the DuckDB engine
never loads it (pyspark is the optional extra ``spark``).

Every session runs in UTC (the ledger's times are naive UTC: the session time zone and the JVMs'
``user.timezone``), reads Parquet timestamps without a zone as ``TIMESTAMP_NTZ``, has no web UI,
binds the driver to ``driver_host`` (127.0.0.1 by default: a cluster on this machine) and keeps its
spill and shuffle files under ``scratch``.
"""

import os
import re
import shutil
import socket
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# spark://host:port, or several for a ZooKeeper-backed standby master (spark://h1:p1,h2:p2)
STANDALONE_MASTER = re.compile(
    r"spark://[A-Za-z0-9.\-]+:[0-9]{1,5}(,[A-Za-z0-9.\-]+:[0-9]{1,5})*")
LOCAL_MASTER = re.compile(r"local(\[([1-9][0-9]*|\*)\])?")
# what Spark's JavaUtils.byteStringAs reads, with a unit (a bare number would mean MiB or bytes
# depending on the setting)
MEMORY = re.compile(r"[1-9][0-9]*(k|m|g|t)b?", re.IGNORECASE)


class SparkUnavailableError(ValueError):
    """pyspark or Java is missing, the master does not answer, or a session cannot be opened as
    configured (a ValueError: the command line reports it as it does a bad setting)."""


@dataclass(frozen=True)
class SparkSettings:
    """How to reach a Spark cluster and size the session (``[gpuledger.engine]``)."""

    master: str  # spark://host:port (a standalone cluster) or local[N]
    scratch: Path  # Parquet exchanged with DuckDB, Spark's local dirs
    driver_memory: str = "2g"
    executor_memory: str = "2g"
    shuffle_partitions: int = 8
    driver_host: str = "127.0.0.1"  # the address executors reach the driver at
    app_name: str = "gpuledger"
    conf: Mapping[str, str] = field(default_factory=dict)  # more spark.* settings, applied last

    def __post_init__(self) -> None:
        problem = master_problem(self.master)
        if problem:
            raise ValueError(problem)
        for name in ("driver_memory", "executor_memory"):
            value = getattr(self, name)
            if not MEMORY.fullmatch(value):
                msg = f"{name}: expected a size such as 512m or 2g, found {value!r}"
                raise ValueError(msg)
        if self.shuffle_partitions < 1:
            msg = f"shuffle_partitions: expected at least 1, found {self.shuffle_partitions!r}"
            raise ValueError(msg)


def master_problem(master: str) -> str | None:
    """Why ``master`` is not a master URL this project supports, or None."""
    if STANDALONE_MASTER.fullmatch(master):
        ports = [int(hp.rsplit(":", 1)[1]) for hp in master[len("spark://"):].split(",")]
        if all(1 <= p <= 65535 for p in ports):
            return None
    elif LOCAL_MASTER.fullmatch(master):
        return None
    return (f"master: expected spark://host:port (a standalone cluster) or local[N], "
            f"found {master!r}")


def spark_conf(settings: SparkSettings) -> dict[str, str]:
    """Every Spark setting of a session opened with ``settings``."""
    utc = "-Duser.timezone=UTC"
    conf = {
        "spark.master": settings.master,
        "spark.app.name": settings.app_name,
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.extraJavaOptions": utc,
        "spark.executor.extraJavaOptions": utc,
        # DuckDB's TIMESTAMP (no zone) stays a TIMESTAMP_NTZ: no shift by any zone on the way
        "spark.sql.parquet.inferTimestampNTZ.enabled": "true",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.host": settings.driver_host,
        "spark.driver.bindAddress": settings.driver_host,
        "spark.local.dir": str(settings.scratch / "spark-local"),
        "spark.sql.warehouse.dir": str(settings.scratch / "spark-warehouse"),
        "spark.driver.memory": settings.driver_memory,
        "spark.executor.memory": settings.executor_memory,
        "spark.sql.shuffle.partitions": str(settings.shuffle_partitions),
    }
    conf.update({str(k): str(v) for k, v in settings.conf.items()})
    return conf


def java_problem() -> str | None:
    """Why no JVM can be started here, or None."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return None
    if shutil.which("java"):
        return None
    return ("expected Java 17 (JAVA_HOME or java on PATH; Debian: openjdk-17-jre-headless), "
            "found none")


def master_unreachable(master: str, timeout_s: float = 5.0) -> str | None:
    """Why no master of a ``spark://`` URL accepts a connection, or None (also for local[N])."""
    if not master.startswith("spark://"):
        return None
    problems = []
    for host_port in master[len("spark://"):].split(","):
        host, port = host_port.rsplit(":", 1)
        try:
            with socket.create_connection((host, int(port)), timeout=timeout_s):
                return None
        except OSError as exc:
            problems.append(f"{host_port}: {exc.strerror or exc}")
    return f"expected a Spark master listening at {master}, found none ({'; '.join(problems)})"


def open_spark(settings: SparkSettings) -> "SparkSession":
    """A ``SparkSession`` on ``settings.master`` (stop it with ``session.stop()``)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        msg = ("engine = \"spark\": expected pyspark (pip install 'gpuledger[spark]'), "
               "found it missing")
        raise SparkUnavailableError(msg) from None
    problem = java_problem() or master_unreachable(settings.master)
    if problem:
        msg = f"engine = \"spark\": {problem}"
        raise SparkUnavailableError(msg)
    # the driver JVM binds where the executors will reach it (and says nothing about a host name
    # that resolves to a loopback address)
    os.environ.setdefault("SPARK_LOCAL_IP", settings.driver_host)
    (settings.scratch / "spark-local").mkdir(parents=True, exist_ok=True)
    builder = SparkSession.builder
    for key, value in spark_conf(settings).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    running = session.sparkContext.master
    if running != settings.master:  # getOrCreate handed back another session of this process
        msg = (f"expected a Spark session on {settings.master}, found one of this process "
               f"already running on {running} (stop it first)")
        raise SparkUnavailableError(msg)
    return session


@contextmanager
def spark_session(settings: SparkSettings) -> Iterator["SparkSession"]:
    """:func:`open_spark`, stopped at the end of the block."""
    session = open_spark(settings)
    try:
        yield session
    finally:
        session.stop()
