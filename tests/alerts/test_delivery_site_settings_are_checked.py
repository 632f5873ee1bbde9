"""``[gpuledger.alerts.smtp]`` and ``[[gpuledger.alerts.webhook]]`` of a site file: parsed from
TOML text as a site file holds it, every mistake an error naming the file, table and key, and no
secret accepted inline."""

import tomllib
from pathlib import Path

import pytest

from gpuledger.alerts.delivery_config import DeliveryConfigError, parse_delivery
from gpuledger.site import SiteError

WHERE = "/etc/gpuledger/site.toml"


def _alerts_table(toml_text: str) -> dict:
    return tomllib.loads(toml_text)["gpuledger"]["alerts"]


def _secret(folder: Path, name: str, text: str, mode: int = 0o600) -> Path:
    path = folder / name
    path.write_text(text)
    path.chmod(mode)
    return path


def test_full_table_parses_with_paths_from_the_site_folder(tmp_path):
    _secret(tmp_path, "smtp.pass", "pw\n")
    _secret(tmp_path, "slack.url", "https://hooks.slack.com/services/T/B/X\n")
    table = _alerts_table("""
[gpuledger.alerts]
dry_run = true            # helper A's key: left to its reader
first_warning_minutes = 60

[gpuledger.alerts.smtp]
host = "smtp.example.org"
username = "gpuledger"
password_file = "smtp.pass"
sender = "gpuledger@example.org"
ca_file = "/etc/ssl/private-ca.pem"

[[gpuledger.alerts.webhook]]
name = "slack-ops"
url_file = "slack.url"
format = "slack"

[[gpuledger.alerts.webhook]]
name = "ticketing"
url = "https://tickets.example.org/hook"
format = "json"
timeout_s = 5
headers = { X-Source = "gpuledger" }
""")
    settings = parse_delivery(table, where=WHERE, base_dir=tmp_path)

    smtp = settings.smtp
    assert smtp is not None
    assert (smtp.host, smtp.port, smtp.starttls, smtp.ssl) == ("smtp.example.org", 587, True,
                                                               False)
    assert smtp.password_file == tmp_path / "smtp.pass"
    assert smtp.ca_file == Path("/etc/ssl/private-ca.pem")
    assert smtp.timeout_s == 30.0
    slack, tickets = settings.webhooks
    assert (slack.name, slack.format, slack.url_file) == ("slack-ops", "slack",
                                                          tmp_path / "slack.url")
    assert slack.resolved_url() == "https://hooks.slack.com/services/T/B/X"
    assert tickets.timeout_s == 5.0
    assert tickets.headers == {"X-Source": "gpuledger"}


def test_implicit_tls_defaults_to_port_465_without_starttls(tmp_path):
    settings = parse_delivery({"smtp": {"host": "mail.example.org", "ssl": True}}, where=WHERE,
                              base_dir=tmp_path)
    assert settings.smtp is not None
    assert (settings.smtp.port, settings.smtp.starttls) == (465, False)
    assert settings.smtp.sender.startswith("gpuledger@")


def test_no_smtp_and_no_webhooks_is_nothing_to_send(tmp_path):
    settings = parse_delivery({"dry_run": False}, where=WHERE, base_dir=tmp_path)
    assert settings.smtp is None
    assert settings.webhooks == ()


def test_inline_password_is_an_error_naming_the_field_and_the_way_out(tmp_path):
    table = {"smtp": {"host": "smtp.example.org", "username": "u", "password": "hunter2"}}
    with pytest.raises(DeliveryConfigError) as caught:
        parse_delivery(table, where=WHERE, base_dir=tmp_path)

    text = str(caught.value)
    assert text.startswith(f"{WHERE}: [gpuledger.alerts.smtp] password: expected no password")
    assert "password_file" in text
    assert "hunter2" not in text
    assert isinstance(caught.value, SiteError)  # the CLI reports it like any site-file error


def test_port_that_is_not_a_number_is_named_with_what_was_found(tmp_path):
    with pytest.raises(DeliveryConfigError) as caught:
        parse_delivery({"smtp": {"host": "h", "port": "abc"}}, where=WHERE, base_dir=tmp_path)
    assert str(caught.value) == (
        f"{WHERE}: [gpuledger.alerts.smtp] port: expected an integer 1-65535, found 'abc'")


@pytest.mark.parametrize(("smtp", "field", "expected"), [
    ({"host": "h", "port": 70000}, "port", "an integer 1-65535"),
    ({"host": "h", "port": True}, "port", "an integer 1-65535"),
    ({"port": 25}, "host", "a string (the key is required)"),
    ({"host": "h", "starttls": "yes"}, "starttls", "true or false"),
    ({"host": "h", "ssl": True, "starttls": True}, "starttls", "false when ssl = true"),
    ({"host": "h", "username": "u"}, "password_file", "username and password_file together"),
    ({"host": "h", "timeout_s": 0}, "timeout_s", "a number of seconds above 0"),
    ({"host": "h", "sender": "nobody"}, "sender", "an e-mail address"),
    ({"host": "h", "tls": True}, "tls", "only the keys"),
])
def test_smtp_mistakes_name_the_key(tmp_path, smtp, field, expected):
    with pytest.raises(DeliveryConfigError) as caught:
        parse_delivery({"smtp": smtp}, where=WHERE, base_dir=tmp_path)
    assert f"{WHERE}: [gpuledger.alerts.smtp] {field}: expected {expected}" in str(caught.value)


def test_username_without_tls_needs_allow_plaintext_auth(tmp_path):
    _secret(tmp_path, "pw", "x")
    smtp = {"host": "localhost", "port": 25, "starttls": False, "username": "u",
            "password_file": "pw"}
    with pytest.raises(DeliveryConfigError, match=r"\] starttls: expected true or ssl = true"):
        parse_delivery({"smtp": smtp}, where=WHERE, base_dir=tmp_path)

    relay = parse_delivery({"smtp": {**smtp, "allow_plaintext_auth": True}}, where=WHERE,
                           base_dir=tmp_path).smtp
    assert relay is not None
    assert relay.allow_plaintext_auth
    assert not relay.encrypted


def test_world_readable_password_file_is_refused(tmp_path):
    _secret(tmp_path, "pw", "x", mode=0o644)
    smtp = {"host": "h", "username": "u", "password_file": "pw"}
    with pytest.raises(DeliveryConfigError) as caught:
        parse_delivery({"smtp": smtp}, where=WHERE, base_dir=tmp_path)
    assert "[gpuledger.alerts.smtp] password_file: expected a secret file not readable" in str(
        caught.value)
    assert "-rw-r--r--" in str(caught.value)


def test_group_readable_password_file_is_accepted(tmp_path):
    _secret(tmp_path, "pw", "x", mode=0o640)
    smtp = {"host": "h", "username": "u", "password_file": "pw"}
    assert parse_delivery({"smtp": smtp}, where=WHERE, base_dir=tmp_path).smtp is not None


@pytest.mark.parametrize(("hook", "field", "expected"), [
    ({"format": "slack"}, "url", "exactly one of url and url_file"),
    ({"url": "https://x.example/h", "url_file": "f"}, "url", "exactly one of url and url_file"),
    ({"url": "ftp://x.example/h"}, "url", "an http:// or https:// URL"),
    ({"url": "https://x.example/h", "format": "discord"}, "format", "one of ['slack'"),
    ({"url": "https://x.example/h", "headers": {"Authorization": "Bearer t"}}, "headers",
     "no Authorization header inline: use bearer_token_file"),
    ({"url": "https://x.example/h", "headers": {"X-A": "a\nb"}}, "headers",
     "a table of header names to one-line strings"),
    ({"url": "https://x.example/h", "retries": 9}, "retries", "only the keys"),
])
def test_webhook_mistakes_name_the_entry_and_key(tmp_path, hook, field, expected):
    _secret(tmp_path, "f", "https://x.example/h")
    with pytest.raises(DeliveryConfigError) as caught:
        parse_delivery({"webhook": [{"url": "https://ok.example/h"}, hook]}, where=WHERE,
                       base_dir=tmp_path)
    text = str(caught.value)
    assert text.startswith(f"{WHERE}: [[gpuledger.alerts.webhook]] #2 {field}: expected "
                           f"{expected}"), text
    assert "Bearer t" not in text


def test_webhook_url_never_appears_in_an_error(tmp_path):
    secret_url = "gopher://hooks.example/services/T0/B0/very-secret"
    with pytest.raises(DeliveryConfigError) as caught:
        parse_delivery({"webhook": [{"url": secret_url}]}, where=WHERE, base_dir=tmp_path)
    assert "very-secret" not in str(caught.value)


def test_two_webhooks_with_one_name_are_an_error(tmp_path):
    hooks = [{"name": "ops", "url": "https://a.example/h"},
             {"name": "ops", "url": "https://b.example/h"}]
    with pytest.raises(DeliveryConfigError, match=r"#2 name: expected a name not used"):
        parse_delivery({"webhook": hooks}, where=WHERE, base_dir=tmp_path)


def test_webhook_as_a_single_table_is_an_error_saying_use_an_array(tmp_path):
    table = _alerts_table('[gpuledger.alerts.webhook]\nurl = "https://a.example/secret"\n')
    with pytest.raises(DeliveryConfigError, match=r"expected an array of tables") as caught:
        parse_delivery(table, where=WHERE, base_dir=tmp_path)
    assert "found a single table" in str(caught.value)
    assert "secret" not in str(caught.value)


def test_header_values_and_misplaced_urls_are_not_echoed(tmp_path):
    hook = {"url": "https://a.example/h", "headers": {"X-Api-Key": ["k-secret"]}}
    with pytest.raises(DeliveryConfigError) as caught:
        parse_delivery({"webhook": [hook]}, where=WHERE, base_dir=tmp_path)
    assert "['X-Api-Key']" in str(caught.value)
    assert "k-secret" not in str(caught.value)
    with pytest.raises(DeliveryConfigError) as caught:
        parse_delivery({"webhook": ["https://a.example/u-secret"]}, where=WHERE,
                       base_dir=tmp_path)
    assert "#1: expected a table, found 'a str'" in str(caught.value)
    assert "u-secret" not in str(caught.value)
