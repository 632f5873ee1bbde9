from pathlib import Path

import pytest

from gpuledger.config import load_settings


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
