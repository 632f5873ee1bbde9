"""Where alerts go: ``[gpuledger.alerts.smtp]`` and ``[[gpuledger.alerts.webhook]]`` of a site
file, validated (docs/alerts-delivery.md).

Secrets never sit in the site file or on a command line: the SMTP password, a webhook URL
(Slack and Teams URLs are bearer secrets) and a bearer token come from files read at send
time. Such a file must not be readable by every user of the machine: ``parse_delivery``
refuses one that is (and ``delivery`` checks again before reading it).
"""

import socket
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from connectors.secrets import SecretFileError, check_secret_file
from gpuledger.site.table import SiteError

WEBHOOK_FORMATS = ("slack", "teams", "json")


class DeliveryConfigError(SiteError):
    """A delivery table that cannot be used; the message names the file, table and key."""


@dataclass(frozen=True)
class SmtpSettings:
    """An SMTP submission server. Port 587 with STARTTLS by default; ``ssl=True`` for
    implicit TLS (port 465)."""

    host: str
    port: int = 587
    starttls: bool = True
    ssl: bool = False
    username: str | None = None
    password_file: Path | None = None
    sender: str = ""  # "" -> gpuledger@<this machine's host name>
    timeout_s: float = 30.0
    # a private CA (PEM) to verify the server with; None: the system's CAs
    ca_file: Path | None = None
    # AUTH over a connection without TLS: only for a local relay, and only when said so
    allow_plaintext_auth: bool = False
    reply_to: str | None = None

    def __post_init__(self) -> None:
        if not self.sender:
            object.__setattr__(self, "sender", f"gpuledger@{socket.gethostname()}")

    @property
    def encrypted(self) -> bool:
        return self.ssl or self.starttls


@dataclass(frozen=True)
class WebhookSettings:
    """One webhook receiver. ``url`` or ``url_file`` (preferred: the URL is the secret)."""

    name: str
    url: str = ""
    url_file: Path | None = None
    format: str = "json"  # one of WEBHOOK_FORMATS
    timeout_s: float = 10.0
    headers: dict[str, str] = field(default_factory=dict)
    # sent as "Authorization: Bearer <token>" (a generic receiver behind a token)
    bearer_token_file: Path | None = None
    # a private CA (PEM) for an in-house receiver; None: the system's CAs
    ca_file: Path | None = None

    def resolved_url(self) -> str:
        """The URL, read from ``url_file`` now when it is set."""
        if self.url_file is None:
            return self.url
        url = read_secret(self.url_file).strip()
        check_url(url, f"{self.url_file}")
        return url


@dataclass(frozen=True)
class DeliverySettings:
    """Every channel: e-mail when ``smtp`` is set, and each webhook."""

    smtp: SmtpSettings | None = None
    webhooks: tuple[WebhookSettings, ...] = ()


def read_secret(path: Path) -> str:
    """A secret file's text without its trailing newline, after ``check_secret_file``."""
    check_secret_file(path)
    try:
        return path.read_text(encoding="utf-8").rstrip("\r\n")
    except (OSError, UnicodeDecodeError) as exc:
        msg = f"{path}: cannot read the secret file: {exc}"
        raise SecretFileError(msg) from None


def check_url(url: str, where: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        # never echo the URL itself: it is a secret
        msg = f"{where}: expected an http:// or https:// URL with a host, found one that is not"
        raise DeliveryConfigError(msg)


class _Reader:
    """One table of the delivery settings; every read key is remembered, the rest are errors."""

    def __init__(self, where: str, label: str, data: object, base_dir: Path) -> None:
        self.where, self.label, self.base_dir = where, label, base_dir
        if not isinstance(data, dict):
            # the value may be a secret (a URL typed where a table belongs): name its type only
            self.fail("", "a table", f"a {type(data).__name__}")
        self.data: dict = data  # type: ignore[assignment]
        self.seen: set[str] = set()

    def fail(self, key: str, expected: str, found: object) -> None:
        label = f"{self.label} {key}" if key else self.label
        msg = f"{self.where}: {label}: expected {expected}, found {found!r}"
        raise DeliveryConfigError(msg)

    def raw(self, key: str) -> object:
        self.seen.add(key)
        return self.data.get(key)

    def text(self, key: str, default: str | None = None, *, required: bool = False) -> str | None:
        value = self.raw(key)
        if value is None:
            if required:
                self.fail(key, "a string (the key is required)", "nothing")
            return default
        if not isinstance(value, str) or (required and not value.strip()):
            self.fail(key, "a non-empty string" if required else "a string", value)
        return value  # type: ignore[return-value]

    def flag(self, key: str, default: bool) -> bool:
        value = self.raw(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.fail(key, "true or false", value)
        return value  # type: ignore[return-value]

    def port(self, key: str, default: int) -> int:
        value = self.raw(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
            self.fail(key, "an integer 1-65535", value)
        return value  # type: ignore[return-value]

    def seconds(self, key: str, default: float) -> float:
        value = self.raw(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float) or not (
                0 < value <= 3600):
            self.fail(key, "a number of seconds above 0 and at most 3600", value)
        return float(value)  # type: ignore[arg-type]

    def secret_file(self, key: str) -> Path | None:
        value = self.text(key)
        if not value:
            return None
        path = Path(value).expanduser()
        path = path if path.is_absolute() else self.base_dir / path
        if path.exists():  # a file made later on the sending host is checked at send time
            try:
                check_secret_file(path)
            except SecretFileError as exc:
                self.fail(key, "a secret file not readable by every user (chmod o-r)",
                          str(exc))
        return path

    def file(self, key: str) -> Path | None:
        value = self.text(key)
        if not value:
            return None
        path = Path(value).expanduser()
        return path if path.is_absolute() else self.base_dir / path

    def done(self) -> None:
        unknown = sorted(set(self.data) - self.seen)
        if unknown:
            self.fail(unknown[0], f"only the keys {sorted(self.seen)}", unknown[0])


def _smtp(r: _Reader) -> SmtpSettings:
    if "password" in r.data:
        r.fail("password", "no password in the site file: put it in a file readable only by "
               "gpuledger and name that file in password_file", "a password (not shown)")
    host = r.text("host", required=True)
    ssl = r.flag("ssl", False)
    starttls = r.flag("starttls", not ssl)
    if ssl and starttls:
        r.fail("starttls", "false when ssl = true (implicit TLS has no STARTTLS step)", True)
    port = r.port("port", 465 if ssl else 587)
    username = r.text("username") or None
    password_file = r.secret_file("password_file")
    if bool(username) != bool(password_file):
        missing = "password_file" if username else "username"
        r.fail(missing, "username and password_file together (or neither)", None)
    allow_plaintext_auth = r.flag("allow_plaintext_auth", False)
    if username and not (ssl or starttls) and not allow_plaintext_auth:
        r.fail("starttls", "true or ssl = true when a username is set (or "
               "allow_plaintext_auth = true for a local relay)", False)
    sender = r.text("sender", "") or ""
    if sender and "@" not in sender:
        r.fail("sender", "an e-mail address", sender)
    settings = SmtpSettings(
        host=host,  # type: ignore[arg-type]
        port=port, starttls=starttls, ssl=ssl, username=username, password_file=password_file,
        sender=sender, timeout_s=r.seconds("timeout_s", 30.0), ca_file=r.file("ca_file"),
        allow_plaintext_auth=allow_plaintext_auth, reply_to=r.text("reply_to") or None,
    )
    r.done()
    return settings


def _headers(r: _Reader) -> dict[str, str]:
    value = r.raw("headers")
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and k.strip() and "\n" not in k + v
            and "\r" not in k + v for k, v in value.items()):
        # header values may be API keys: name the keys only
        found = sorted(value) if isinstance(value, dict) else f"a {type(value).__name__}"
        r.fail("headers", "a table of header names to one-line strings", found)
    lowered = {k.lower() for k in value}  # type: ignore[union-attr]
    if "authorization" in lowered:
        r.fail("headers", "no Authorization header inline: use bearer_token_file",
               "an Authorization header (not shown)")
    return dict(value)  # type: ignore[arg-type]


def _webhook(r: _Reader, index: int, names: set[str]) -> WebhookSettings:
    name = r.text("name", f"webhook-{index + 1}") or f"webhook-{index + 1}"
    if name in names:
        r.fail("name", "a name not used by another webhook", name)
    names.add(name)
    url = r.text("url", "") or ""
    url_file = r.secret_file("url_file")
    if bool(url) == bool(url_file):
        r.fail("url", "exactly one of url and url_file", "both" if url else "neither")
    if url:
        check_url(url, f"{r.where}: {r.label} url")
    fmt = r.text("format", "json")
    if fmt not in WEBHOOK_FORMATS:
        r.fail("format", f"one of {list(WEBHOOK_FORMATS)}", fmt)
    settings = WebhookSettings(
        name=name, url=url, url_file=url_file, format=fmt,  # type: ignore[arg-type]
        timeout_s=r.seconds("timeout_s", 10.0), headers=_headers(r),
        bearer_token_file=r.secret_file("bearer_token_file"), ca_file=r.file("ca_file"),
    )
    r.done()
    return settings


def parse_delivery(table: dict, *, where: str, base_dir: Path) -> DeliverySettings:
    """Read ``smtp`` and ``webhook`` of the ``[gpuledger.alerts]`` table (the other keys of
    that table are the alert rules' and are left to their reader). Relative paths are taken
    from ``base_dir``; every problem is a ``DeliveryConfigError`` naming ``where`` and the key.
    """
    smtp = None
    if table.get("smtp") is not None:
        smtp = _smtp(_Reader(where, "[gpuledger.alerts.smtp]", table["smtp"], base_dir))
    hooks = table.get("webhook")
    if hooks is None:
        hooks = []
    if not isinstance(hooks, list):
        found = "a single table" if isinstance(hooks, dict) else f"a {type(hooks).__name__}"
        msg = (f"{where}: [[gpuledger.alerts.webhook]]: expected an array of tables "
               f"([[gpuledger.alerts.webhook]] entries, double brackets), found {found}")
        raise DeliveryConfigError(msg)
    names: set[str] = set()
    webhooks = tuple(
        _webhook(_Reader(where, f"[[gpuledger.alerts.webhook]] #{i + 1}", hook, base_dir), i, names)
        for i, hook in enumerate(hooks))
    return DeliverySettings(smtp=smtp, webhooks=webhooks)
