import csv
import io
from pathlib import Path

import pytest

from gpuledger.cli import main
from tests.helpers import TINY_WORLD, copy_tiny_world


def test_load_world_then_sql_answers_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    db = tmp_path / "ledger.duckdb"
    assert main(["--db", str(db), "load-world", str(TINY_WORLD)]) == 0
    err = capsys.readouterr().err
    assert "[1/7] loading nodes" in err
    assert "sacct: 59 lines read: 18 runs, 41 steps" in err
    assert "identity_map: 4 rows loaded, 0 rejected" in err
    assert main(["--db", str(db), "sql",
                 "SELECT pool, count(*) AS gpus FROM nodes GROUP BY pool ORDER BY pool"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows == [["pool", "gpus"], ["kubernetes", "2"], ["shared", "1"], ["slurm", "2"]]


def test_db_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    db = tmp_path / "env.duckdb"
    monkeypatch.setenv("GPULEDGER_DB", str(db))
    assert main(["import-identity", str(TINY_WORLD / "identity_map.csv")]) == 0
    assert db.exists()
    assert db.with_name("env.serving.duckdb").exists()


def test_import_identity_reports_rejects(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    world = copy_tiny_world(tmp_path)
    path = world / "identity_map.csv"
    with path.open("a", encoding="utf-8") as fh:
        fh.write("slurm_user,zed,zed,ops,CC-1,yesterday,\n")
    assert main(["--db", str(tmp_path / "l.duckdb"), "import-identity", str(path)]) == 0
    err = capsys.readouterr().err
    assert "4 rows loaded, 1 rejected" in err
    assert f"rejected {path}:6: field valid_from" in err


def test_sql_without_a_ledger_is_a_clear_error(tmp_path: Path, capsys):
    assert main(["--db", str(tmp_path / "none.duckdb"), "sql", "SELECT 1"]) == 1
    assert "expected a published ledger" in capsys.readouterr().err


# --------------------------------------------------------------------------- sources from the site

SMALL_CLUSTER_OM = Path(__file__).resolve().parents[1] / "fixtures" / "openmetrics" / \
    "small-cluster.om.gz"


def _site(tmp_path: Path, clusters: str) -> Path:
    path = tmp_path / "gpuledger.toml"
    path.write_text(f'[gpuledger]\nfirst_day = "2025-01-06"\n{clusters}', encoding="utf-8")
    return path


def test_ingest_kubernetes_reads_each_site_cluster_s_source(tmp_path: Path, capsys):
    om = tmp_path / "small.om.gz"
    om.write_bytes(SMALL_CLUSTER_OM.read_bytes())
    config = _site(tmp_path, '[gpuledger.clusters.east.prometheus]\nopenmetrics = "small.om.gz"\n'
                             '[gpuledger.clusters.west.slurm]\nprefix = "ssh west"\n')
    db = tmp_path / "l.duckdb"
    assert main(["--config", str(config), "--db", str(db), "ingest", "kubernetes",
                 "--start", "2025-01-06", "--end", "2025-01-07"]) == 0
    assert main(["--db", str(db), "sql",
                 "SELECT DISTINCT cluster FROM k8s_node_capacity"]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == ["east"]
    # a cluster without [prometheus] has nothing to ingest here
    assert main(["--config", str(config), "--db", str(db), "ingest", "kubernetes",
                 "--cluster", "west", "--start", "2025-01-06", "--end", "2025-01-07"]) == 1
    assert "expected a cluster with a [prometheus] table, found none among ['west']" in \
        capsys.readouterr().err


def test_ingest_kubernetes_sends_the_site_s_selector(tmp_path: Path):
    from tests.connectors.kubernetes.fakes import FakePrometheus

    with FakePrometheus() as fake:
        config = _site(tmp_path, f'[gpuledger.clusters.b.prometheus]\nurl = "{fake.url}"\n'
                                 'selector = \'cluster="b"\'\nretries = 0\n')
        assert main(["--config", str(config), "--db", str(tmp_path / "l.duckdb"), "ingest",
                     "kubernetes", "--start", "2025-01-06", "--end", "2025-01-07"]) == 0
    queries = [p.get("query") or p.get("match[]") for _, p, _ in fake.requests]
    assert queries
    assert all('cluster="b"' in q for q in queries), queries


def test_ingest_slurm_takes_each_live_cluster_s_prefix(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch):
    from gpuledger.cli import build_parser
    from gpuledger.cli.sources import slurm_sources
    from gpuledger.site.config import load_settings

    monkeypatch.delenv("GPULEDGER_SACCT_PREFIX", raising=False)
    config = _site(tmp_path, '[gpuledger.clusters.a.slurm]\nprefix = "ssh login-a"\n'
                             'timeout_s = 60\nlookback_hours = 12\nsreport = false\n'
                             '[gpuledger.clusters.b.slurm]\nprefix = "ssh login-b"\n'
                             '[gpuledger.clusters.c.slurm]\nmode = "dump"\ndump = "d.txt"\n')
    settings = load_settings(config)

    def sources(*flags: str):
        args = build_parser().parse_args(["ingest", "slurm", "--start", "2025-01-06",
                                          "--end", "2025-01-07", *flags])
        return [(label, r.prefix, r.timeout_s, lookback, sreport)
                for label, r, _, lookback, sreport in slurm_sources(args, settings)]

    assert sources() == [("a: ", ("ssh", "login-a"), 60.0, 12.0, False),
                         ("b: ", ("ssh", "login-b"), 300.0, 48.0, True)]
    assert sources("--cluster", "b", "--timeout", "5", "--lookback-hours", "1") == [
        ("", ("ssh", "login-b"), 5.0, 1.0, True)]
    monkeypatch.setenv("GPULEDGER_SACCT_PREFIX", "ssh other")
    assert sources("--cluster", "a")[0][1] == ("ssh", "other")
    with pytest.raises(ValueError, match=r"expected a cluster with \[slurm\] mode = \"sacct\""):
        sources("--cluster", "c")
