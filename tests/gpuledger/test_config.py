from pathlib import Path

import pytest

from gpuledger.site.config import load_settings


def test_precedence_flag_over_env_over_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    config = tmp_path / "gpuledger.toml"
    config.write_text(
        '[gpuledger]\ndb = "from-file.duckdb"\nsacct_prefix = "ssh login"\n'
        'prometheus_url = "http://file"\nunknown_key = 3\n',
        encoding="utf-8",
    )
    monkeypatch.delenv("GPULEDGER_DB", raising=False)
    monkeypatch.setenv("GPULEDGER_PROMETHEUS_URL", "http://env")
    settings = load_settings(config)
    assert settings.db == Path("from-file.duckdb")
    assert settings.sacct_prefix == "ssh login"
    assert settings.prometheus_url == "http://env"
    assert settings.extra == {"unknown_key": 3}
    monkeypatch.setenv("GPULEDGER_DB", "from-env.duckdb")
    assert load_settings(config).db == Path("from-env.duckdb")
    assert load_settings(config, db="from-flag.duckdb").db == Path("from-flag.duckdb")


def test_missing_named_config_file_is_an_error(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="expected a config file at"):
        load_settings(tmp_path / "nope.toml")


def test_defaults_without_any_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    for var in ("GPULEDGER_DB", "GPULEDGER_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    assert load_settings().db == Path("data/gpuledger.duckdb")


SITE = """\
[gpuledger]
first_day = "2026-01-05"
db = "ledger/gpuledger.duckdb"
reports_dir = "out"
gpu_resources = ["nvidia.com/gpu", "example.com/gpu"]

[gpuledger.reference]
identity_map = "identity.csv"

[gpuledger.clusters.a]
node_aliases = { "n1.a.example" = "n1" }

[gpuledger.clusters.a.slurm]
prefix = "ssh login-a"
limits = { max_gpus_per_job = 512 }

[gpuledger.clusters.b]
node_aliases = { "n2.b.example" = "n2" }

[gpuledger.clusters.b.prometheus]
url = "https://thanos.example.org"
selector = 'cluster="b"'
"""


def test_a_site_file_gives_the_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    for var in ("GPULEDGER_DB", "GPULEDGER_REPORTS_DIR", "GPULEDGER_GPU_RESOURCES"):
        monkeypatch.delenv(var, raising=False)
    folder = tmp_path / "site"
    folder.mkdir()
    config = folder / "gpuledger.toml"
    config.write_text(SITE, encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # relative paths are the file's folder's, not the cwd's
    settings = load_settings(config)
    assert settings.db == folder / "ledger" / "gpuledger.duckdb"
    assert settings.reports_dir == folder / "out"
    assert settings.identity_map == folder / "identity.csv"
    assert settings.gpu_resources == ("nvidia.com/gpu", "example.com/gpu")
    assert settings.node_aliases == {"n1.a.example": "n1", "n2.b.example": "n2"}
    assert settings.extra == {"slurm_limits": {"max_gpus_per_job": 512}}
    assert settings.sacct_prefix == ""  # two clusters: no one flat prefix
    assert settings.site is not None
    assert settings.site.db == settings.db
    assert settings.site.cluster("b").prometheus.selector == 'cluster="b"'  # type: ignore


def test_environment_and_flags_override_the_site_file(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch):
    config = tmp_path / "gpuledger.toml"
    config.write_text(SITE, encoding="utf-8")
    monkeypatch.setenv("GPULEDGER_DB", "env.duckdb")
    monkeypatch.setenv("GPULEDGER_GPU_RESOURCES", "amd.com/gpu")
    settings = load_settings(config)
    assert settings.db == Path("env.duckdb")
    assert settings.gpu_resources == ("amd.com/gpu",)
    flagged = load_settings(config, db="flag.duckdb")
    assert flagged.db == Path("flag.duckdb")
    assert flagged.site.db == Path("flag.duckdb")  # type: ignore[union-attr]


def test_one_cluster_site_fills_the_flat_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("GPULEDGER_SACCT_PREFIX", raising=False)
    one = SITE.split("[gpuledger.clusters.b]")[0]
    config = tmp_path / "gpuledger.toml"
    config.write_text(one, encoding="utf-8")
    settings = load_settings(config)
    assert settings.sacct_prefix == "ssh login-a"
    assert settings.extra["cluster"] == "a"


def test_the_site_file_from_gpuledger_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    config = tmp_path / "elsewhere.toml"
    config.write_text(SITE, encoding="utf-8")
    monkeypatch.delenv("GPULEDGER_DB", raising=False)
    monkeypatch.setenv("GPULEDGER_CONFIG", str(config))
    assert load_settings().db == tmp_path / "ledger" / "gpuledger.duckdb"
