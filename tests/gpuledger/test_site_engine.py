"""``[gpuledger.engine]``: DuckDB unless the site says spark with a master; every bad value stops
the site file with its file, line and key ("expected …, found …"); a DuckDB site never imports
pyspark."""

import subprocess
import sys
from pathlib import Path

import pytest

from gpuledger.cli import main
from gpuledger.site import SiteError, load_site, with_environment
from gpuledger.site.engine import EngineSite, key_line, open_engine, spark_settings
from models.engines.spark_session import SparkSettings, spark_conf

BASE = """\
[gpuledger]
first_day = "2026-01-05"
db = "ledger/gpuledger.duckdb"

[gpuledger.clusters.a.slurm]
mode = "dump"
dump = "sacct.txt"
"""


def _site(tmp_path: Path, engine: str) -> Path:
    path = tmp_path / "gpuledger.toml"
    path.write_text(BASE + "\n[gpuledger.engine]\n" + engine, encoding="utf-8")
    return path


def test_without_the_table_the_engine_is_duckdb(tmp_path: Path):
    path = tmp_path / "gpuledger.toml"
    path.write_text(BASE, encoding="utf-8")
    assert load_site(path).engine == EngineSite()
    assert EngineSite().kind == "duckdb"


def test_a_spark_site_with_every_key(tmp_path: Path):
    site = load_site(_site(tmp_path, """\
kind = "spark"
master = "spark://spark-master.example.org:7077"
scratch = "/srv/spark-scratch"
driver_memory = "4g"
executor_memory = "8G"
shuffle_partitions = 64
driver_host = "10.1.2.3"
conf = { "spark.sql.ansi.enabled" = "false", "spark.executor.cores" = 4 }
"""))
    e = site.engine
    assert (e.kind, e.master, e.scratch) == (
        "spark", "spark://spark-master.example.org:7077", Path("/srv/spark-scratch"))
    assert (e.driver_memory, e.executor_memory, e.shuffle_partitions, e.driver_host) == (
        "4g", "8G", 64, "10.1.2.3")
    assert e.conf == {"spark.sql.ansi.enabled": "false", "spark.executor.cores": "4"}
    settings = spark_settings(site)
    conf = spark_conf(settings)
    assert conf["spark.master"] == "spark://spark-master.example.org:7077"
    assert conf["spark.driver.memory"] == "4g"
    assert conf["spark.executor.memory"] == "8G"
    assert conf["spark.sql.shuffle.partitions"] == "64"
    assert conf["spark.driver.host"] == conf["spark.driver.bindAddress"] == "10.1.2.3"
    assert conf["spark.local.dir"] == "/srv/spark-scratch/spark-local"
    assert conf["spark.executor.cores"] == "4"  # the site's conf, applied last
    assert conf["spark.sql.ansi.enabled"] == "false"


def test_spark_sessions_run_in_utc_without_a_ui_on_the_loopback(tmp_path: Path):
    conf = spark_conf(SparkSettings(master="local[2]", scratch=tmp_path))
    assert conf["spark.sql.session.timeZone"] == "UTC"
    assert "-Duser.timezone=UTC" in conf["spark.driver.extraJavaOptions"]
    assert "-Duser.timezone=UTC" in conf["spark.executor.extraJavaOptions"]
    assert conf["spark.sql.parquet.inferTimestampNTZ.enabled"] == "true"
    assert conf["spark.ui.enabled"] == "false"
    assert conf["spark.driver.bindAddress"] == "127.0.0.1"
    assert conf["spark.local.dir"] == str(tmp_path / "spark-local")
    assert (conf["spark.driver.memory"], conf["spark.executor.memory"]) == ("2g", "2g")
    assert conf["spark.sql.shuffle.partitions"] == "8"


def test_the_scratch_folder_defaults_to_beside_the_ledger(tmp_path: Path, monkeypatch):
    site = load_site(_site(tmp_path, 'kind = "spark"\nmaster = "local[2]"\n'))
    assert spark_settings(site).scratch == tmp_path / "ledger" / "gpuledger.spark"
    # ... the ledger in use: GPULEDGER_DB over the file
    monkeypatch.setenv("GPULEDGER_DB", str(tmp_path / "elsewhere" / "l.duckdb"))
    assert spark_settings(with_environment(site)).scratch == tmp_path / "elsewhere" / "l.spark"
    relative = load_site(_site(tmp_path, 'kind = "spark"\nmaster = "local"\nscratch = "s"\n'))
    assert relative.engine.scratch == tmp_path / "s"  # the site file's folder, as every path


@pytest.mark.parametrize("master", ["spark://127.0.0.1:7077", "spark://h1:7077,h2:7078",
                                    "local", "local[1]", "local[16]", "local[*]"])
def test_masters_that_are_accepted(tmp_path: Path, master: str):
    site = load_site(_site(tmp_path, f'kind = "spark"\nmaster = "{master}"\n'))
    assert site.engine.master == master


@pytest.mark.parametrize(("engine", "line", "key", "expected", "found"), [
    ('kind = "pyspark"\n', 10, "kind", "one of ['duckdb', 'spark']", "'pyspark'"),
    ("kind = 1\n", 10, "kind", "a string", "1"),
    ('kind = "spark"\n', 9, "master", "the Spark master URL, spark://host:port or local[N], "
     'when kind = "spark"', "None"),
    ('kind = "spark"\nmaster = "127.0.0.1:7077"\n', 11, "master",
     "spark://host:port (a standalone cluster) or local[N]", "'127.0.0.1:7077'"),
    ('kind = "spark"\nmaster = "spark://h:99999"\n', 11, "master",
     "spark://host:port (a standalone cluster) or local[N]", "'spark://h:99999'"),
    ('kind = "spark"\nmaster = "local[0]"\n', 11, "master",
     "spark://host:port (a standalone cluster) or local[N]", "'local[0]'"),
    ('kind = "spark"\nmaster = "yarn"\n', 11, "master",
     "spark://host:port (a standalone cluster) or local[N]", "'yarn'"),
    ('master = "local"\n\ndriver_memory = "2"\n', 12, "driver_memory",
     "a size with a unit, such as 512m or 2g", "'2'"),
    ('executor_memory = "lots"\n', 10, "executor_memory",
     "a size with a unit, such as 512m or 2g", "'lots'"),
    ("shuffle_partitions = 0\n", 10, "shuffle_partitions", "a whole number of at least 1", "0"),
    ("shuffle_partitions = 8.5\n", 10, "shuffle_partitions", "a whole number of at least 1",
     "8.5"),
    ("shuffle_partitions = true\n", 10, "shuffle_partitions", "a whole number of at least 1",
     "True"),
    ('driver_host = "not a host"\n', 10, "driver_host",
     "a host name or an IP address the executors can reach", "'not a host'"),
    ('conf = { "sql.ansi.enabled" = "true" }\n', 10, "conf", "a table of spark.* settings",
     "{'sql.ansi.enabled': 'true'}"),
    ('conf = { "spark.master" = "local" }\n', 10, "conf", "the master in master, not in conf",
     "'local'"),
])
def test_a_bad_value_names_the_file_line_and_key(tmp_path: Path, engine: str, line: int,
                                                  key: str, expected: str, found: str):
    path = _site(tmp_path, engine)
    with pytest.raises(SiteError) as caught:
        load_site(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:{line}: [gpuledger.engine.{key}]: expected {expected}")
    assert message.endswith(f"found {found}")


def test_an_unknown_key_is_an_error_on_its_line(tmp_path: Path):
    path = _site(tmp_path, 'kind = "spark"\nmasters = "local"\n')
    with pytest.raises(SiteError, match=rf"^{path}:11: \[gpuledger.engine\]: expected only the "
                                        r"keys \[.*'master'.*\], found 'masters'$"):
        load_site(path)


def test_the_line_of_a_dotted_key_is_found(tmp_path: Path):
    path = tmp_path / "gpuledger.toml"
    path.write_text(BASE.replace('db = "ledger/gpuledger.duckdb"\n',
                                 'engine.kind = "sparks"  # a typo\n'), encoding="utf-8")
    with pytest.raises(SiteError, match=rf"^{path}:3: \[gpuledger.engine.kind\]: expected one "):
        load_site(path)
    assert key_line(path, "gpuledger.engine", "master") is None  # no table header either


def test_the_cli_reports_a_bad_engine_and_exits_1(tmp_path: Path, capsys):
    path = _site(tmp_path, 'kind = "spark"\nmaster = "spark://nowhere"\n')
    assert main(["--config", str(path), "build"]) == 1
    err = capsys.readouterr().err
    assert f"{path}:11: [gpuledger.engine.master]: expected spark://host:port" in err


def test_a_duckdb_site_builds_without_importing_pyspark(tmp_path: Path):
    # a fresh interpreter: this one may have imported pyspark for another test
    path = _site(tmp_path, 'kind = "duckdb"\nmaster = "spark://unused:7077"\n')
    code = (
        "import sys\n"
        "from gpuledger.site import load_site\n"
        "from gpuledger.site.engine import open_engine\n"
        "import pipelines.defs.engine as e\n"
        f"site = load_site({str(path)!r})\n"
        "with open_engine(site) as engine:\n"
        "    print(engine.name, type(e.engine_resource(site)).__name__)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j',"
        " 'dagster_pyspark')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=Path(__file__).resolve().parents[2])
    assert done.stdout.splitlines() == ["duckdb EngineResource", "[]"]


def test_without_a_site_the_engine_is_duckdb():
    with open_engine(None) as engine:
        assert engine.name == "duckdb"
