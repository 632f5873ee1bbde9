"""A bad site file stops every command on start, with an error naming the file and the key
("expected …, found …"); `gpuledger` prints it and exits 1 before touching the ledger."""

from pathlib import Path

import pytest

from gpuledger.cli import main
from gpuledger.site import SiteError, load_site
from gpuledger.site.config import load_settings

VALID = """\
[gpuledger]
first_day = "2026-01-05"

[gpuledger.clusters.a.slurm]
mode = "dump"
dump = "sacct.txt"

[gpuledger.clusters.a.prometheus]
url = "https://thanos.example.org"
selector = 'cluster="a"'

[gpuledger.schedules]
daily = "0 1 * * *"
"""


def _site(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gpuledger.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_valid_base_file_loads(tmp_path: Path):
    site = load_site(_site(tmp_path, VALID))
    assert site.cluster("a").prometheus.selector == 'cluster="a"'  # type: ignore[union-attr]
    assert site.cluster("a").slurm.dump == tmp_path / "sacct.txt"  # type: ignore[union-attr]


CASES = {
    "unknown key": (VALID.replace('first_day = "2026-01-05"',
                                  'first_day = "2026-01-05"\nfirstday = "2026-01-06"'),
                    "[gpuledger]", "found 'firstday'"),
    "unknown key in a cluster table": (
        VALID.replace('mode = "dump"', 'mode = "dump"\nprefx = "x"'),
        "[gpuledger.clusters.a.slurm]", "found 'prefx'"),
    "wrong type": (VALID.replace('url = "https://thanos.example.org"',
                                 'url = "https://thanos.example.org"\ntimeout_s = "fast"'),
                   "[gpuledger.clusters.a.prometheus.timeout_s]",
                   "expected a number, found 'fast'"),
    "wrong type of a flag": (VALID.replace('daily = "0 1 * * *"', 'enabled = "yes"'),
                             "[gpuledger.schedules.enabled]", "expected true or false"),
    "missing first_day": (VALID.replace('first_day = "2026-01-05"\n', ""),
                          "[gpuledger.first_day]", "expected the first UTC day to account"),
    "first_day not a date": (VALID.replace('"2026-01-05"', '"5 Jan 2026"', 1),
                             "[gpuledger.first_day]", "expected a date such as 2026-01-05"),
    "no clusters": ('[gpuledger]\nfirst_day = 2026-01-05\n\n[gpuledger.clusters]\n',
                    "[gpuledger.clusters]", "expected at least one [gpuledger.clusters.<name>]"),
    "a cluster without a source": (VALID + "\n[gpuledger.clusters.b]\n",
                                   "[gpuledger.clusters.b]", "expected at least one source"),
    "dump mode without dump": (VALID.replace('dump = "sacct.txt"\n', ""),
                               "[gpuledger.clusters.a.slurm.dump]",
                               'expected the path of a sacct dump file when mode = "dump"'),
    "bad slurm mode": (VALID.replace('mode = "dump"', 'mode = "live"'),
                       "[gpuledger.clusters.a.slurm.mode]", "expected one of ['sacct', 'dump']"),
    "url and openmetrics both": (
        VALID.replace('selector = ', 'openmetrics = "m.om"\nselector = '),
        "[gpuledger.clusters.a.prometheus.url]",
        "expected exactly one of url (a live server) and openmetrics (a file)"),
    "neither url nor openmetrics": (VALID.replace('url = "https://thanos.example.org"\n', ""),
                                    "[gpuledger.clusters.a.prometheus.url]",
                                    "expected exactly one of url"),
    "bad selector with braces": (VALID.replace("""'cluster="a"'""", """'{cluster="a"}'"""),
                                 "[gpuledger.clusters.a.prometheus.selector]",
                                 "expected label matchers without braces"),
    "bad selector unquoted": (VALID.replace("""'cluster="a"'""", "'cluster=a'"),
                              "[gpuledger.clusters.a.prometheus.selector]",
                              "found 'cluster=a'"),
    "bad cron": (VALID.replace('daily = "0 1 * * *"', 'daily = "every day at one"'),
                 "[gpuledger.schedules.daily]", "expected a cron expression of five fields"),
    "bad limits key": (VALID.replace('dump = "sacct.txt"',
                                     'dump = "sacct.txt"\nlimits = { max_gpus = 8 }'),
                       "[gpuledger.clusters.a.slurm.limits]",
                       "expected slurm_limits keys among"),
    "bad limits value": (VALID.replace('dump = "sacct.txt"',
                                       'dump = "sacct.txt"\nlimits = { max_gpus_per_node = -1 }'),
                         "[gpuledger.clusters.a.slurm.limits]",
                         "expected slurm_limits.max_gpus_per_node as"),
    "a table outside [gpuledger]": (VALID + "\n[clusters.b.slurm]\nmode = \"sacct\"\n",
                                    "expected every setting under [gpuledger]", "[clusters]"),
    "a bad cluster name": (VALID.replace("clusters.a.slurm", 'clusters."a b".slurm'),
                           "[gpuledger.clusters.a b]", "expected a cluster name of letters"),
}


@pytest.mark.parametrize("case", CASES)
def test_every_error_names_the_file_and_the_key(tmp_path: Path, case: str):
    text, key, expected = CASES[case]
    path = _site(tmp_path, text)
    with pytest.raises(SiteError) as raised:
        load_site(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: "), message
    assert key in message, message
    assert expected in message, message
    # the settings of every command come from the same validation
    with pytest.raises(SiteError, match="expected"):
        load_settings(path)


def test_the_command_line_prints_the_error_and_exits_1(tmp_path: Path, capsys):
    path = _site(tmp_path, VALID.replace('daily = "0 1 * * *"', 'daily = "hourly"'))
    db = tmp_path / "ledger.duckdb"
    assert main(["--config", str(path), "--db", str(db), "load"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"gpuledger load: error: {path}: [gpuledger.schedules.daily]: "
                          "expected a cron expression of five fields, found 'hourly'")
    assert not db.exists()


def test_a_missing_site_file_named_by_the_environment(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.setenv("GPULEDGER_CONFIG", str(tmp_path / "nope.toml"))
    assert main(["--db", str(tmp_path / "l.duckdb"), "load"]) == 1
    err = capsys.readouterr().err
    # the file the environment names must exist: defaults would write somewhere else
    missing = tmp_path / "nope.toml"
    assert f"expected a config file at {missing} (GPULEDGER_CONFIG), found none" in err


def test_a_toml_syntax_error_names_the_file(tmp_path: Path):
    path = _site(tmp_path, VALID + "\n[gpuledger.clusters.a.slurm\n")
    with pytest.raises(ValueError, match=rf"^{tmp_path}.*expected TOML, found a syntax error"):
        load_settings(path)


def test_the_documented_examples_are_valid_site_files(tmp_path: Path):
    doc = (Path(__file__).resolve().parents[2] / "docs" / "site-file.md").read_text("utf-8")
    blocks = [b.split("```", 1)[0] for b in doc.split("```toml\n")[1:]]
    assert len(blocks) == 2
    full, thanos = (load_site(_site(tmp_path, b)) for b in blocks)
    for part in ("slurm", "prometheus", "kueue", "dra"):  # the full example has every table
        assert getattr(full.cluster("hpc"), part) is not None, part
    # ... and every key site.py reads
    from dataclasses import fields

    from gpuledger import site as site_module
    tables = (site_module.Site, site_module.ClusterSite, site_module.SlurmSite,
              site_module.PrometheusSite, site_module.KueueSite, site_module.ReferenceSite,
              site_module.ScheduleSite, site_module.QualityThresholds, site_module.SharingNames,
              site_module.DraClusterSite)
    structural = {"path", "clusters", "reference", "schedules", "name", "slurm", "prometheus",
                  "kueue", "idle", "quality", "sharing", "alerts", "focus", "engine", "dra"}
    # [gpuledger.dra]: its keys (gpuledger/site/dra.py) in the full example too
    assert all(f"\n{key} =" in blocks[0] for key in ("drivers", "device_classes",
                                                      "kueue_config", "device_class_mappings"))
    # idle, alerts, focus, engine: their keys are in their own sections of docs/site-file.md
    missing = [f"{t.__name__}.{f.name}" for t in tables for f in fields(t)
               if f.name not in structural and f"\n{f.name} =" not in blocks[0]
               and f"\n# {f.name} =" not in blocks[0]]  # a key off by default, shown commented
    assert missing == []
    assert [c.prometheus.selector for c in thanos.clusters] == [  # type: ignore[union-attr]
        'cluster="east"', 'cluster="west", tenant!="test"']
