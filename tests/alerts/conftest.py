"""Real receivers on 127.0.0.1 for the alert delivery tests.

``smtp_server``: aiosmtpd (PyPI, the asyncio successor of the stdlib smtpd) behind STARTTLS with
a self-signed certificate made for the test session, AUTH LOGIN/PLAIN checked against a username
and password; it keeps every message it accepts. ``make_smtp_server(tls=False)`` gives one
without TLS (for the tests that AUTH is never sent in clear).

``webhook_receiver``: an http.server in a thread that records each request (method, path,
headers, JSON body) and can be told to fail the next N requests with a status.
"""

import datetime as dt
import email
import email.policy
import ipaddress
import json
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from gpuledger.alerts.delivery_config import SmtpSettings, WebhookSettings
from gpuledger.alerts.message import Alert

USERNAME = "gpuledger-bot"
PASSWORD = "s3cret-Pa55 with spaces"  # the test server's own password


@dataclass(frozen=True)
class TestCertificate:
    cert_file: Path  # PEM; also the client's ca_file (self-signed)
    key_file: Path


@pytest.fixture(scope="session")
def test_certificate(tmp_path_factory: pytest.TempPathFactory) -> TestCertificate:
    """A self-signed certificate for 127.0.0.1 and localhost, made now (nothing checked in)."""
    folder = tmp_path_factory.mktemp("tls")
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpuledger test SMTP")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name).issuer_name(name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "server.pem", folder / "server.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return TestCertificate(cert_file, key_file)


def free_port() -> int:
    """A port nothing listens on (aiosmtpd's Controller cannot bind port 0: it connects to its
    own port to start)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass(frozen=True)
class ReceivedMail:
    mail_from: str
    rcpt_tos: tuple[str, ...]
    message: EmailMessage
    tls: bool            # the DATA came over TLS
    login: str | None    # the user that authenticated, if any


@dataclass
class SmtpServer:
    host: str
    port: int
    ca_file: Path | None
    password_file: Path
    messages: list[ReceivedMail] = field(default_factory=list)
    auth_attempts: list[tuple[str, str]] = field(default_factory=list)  # (mechanism, login)
    # client (host, port) of each connection that tried AUTH: one per connection, however
    # many mechanisms smtplib tries in it
    auth_connections: set[tuple[str, int]] = field(default_factory=set)
    # DATA answers "451 try again later" this many more times (greylisting, a full queue)
    temporary_failures: int = 0
    data_attempts: int = 0
    implicit_tls: bool = False
    # RCPT TO these addresses is answered "550 no such user"
    unknown_users: set[str] = field(default_factory=set)

    def settings(self, **overrides: object) -> SmtpSettings:
        """Client settings that fit this server (STARTTLS, the test CA, the right password)."""
        base: dict[str, object] = {
            "host": self.host, "port": self.port,
            "starttls": self.ca_file is not None and not self.implicit_tls,
            "ssl": self.implicit_tls,
            "username": USERNAME, "password_file": self.password_file,
            "sender": "gpuledger@cluster.example.org", "timeout_s": 10.0,
            "ca_file": self.ca_file,
        }
        base.update(overrides)
        return SmtpSettings(**base)  # type: ignore[arg-type]


class _Recorder:
    """aiosmtpd handler and authenticator: keeps what arrives, checks the password."""

    def __init__(self, server: SmtpServer) -> None:
        self.server = server

    def authenticate(self, smtp: SMTP, session: Session, envelope: Envelope, mechanism: str,
                     auth_data: object) -> AuthResult:
        if not isinstance(auth_data, LoginPassword):
            return AuthResult(success=False, handled=False)
        login = auth_data.login.decode()
        self.server.auth_attempts.append((mechanism, login))
        self.server.auth_connections.add(tuple(session.peer))  # type: ignore[arg-type]
        ok = login == USERNAME and auth_data.password.decode() == PASSWORD
        return AuthResult(success=ok, handled=False, auth_data=login if ok else None)

    async def handle_RCPT(self, smtp: SMTP, session: Session, envelope: Envelope, address: str,
                          rcpt_options: list[str]) -> str:
        if address in self.server.unknown_users:
            return "550 5.1.1 No such user (planted by the test)"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, smtp: SMTP, session: Session, envelope: Envelope) -> str:
        self.server.data_attempts += 1
        if self.server.temporary_failures > 0:
            self.server.temporary_failures -= 1
            return "451 4.3.0 Try again later (planted by the test)"
        message = email.message_from_bytes(envelope.original_content or b"",
                                           policy=email.policy.default)
        self.server.messages.append(ReceivedMail(
            mail_from=envelope.mail_from or "", rcpt_tos=tuple(envelope.rcpt_tos),
            message=message,  # type: ignore[arg-type]
            # after STARTTLS and under implicit TLS alike, the transport is the TLS one
            tls=smtp.transport is not None
            and smtp.transport.get_extra_info("ssl_object") is not None,
            login=session.auth_data if session.authenticated else None))  # type: ignore[arg-type]
        return "250 Message accepted for delivery"


@pytest.fixture
def make_smtp_server(test_certificate: TestCertificate,
                     tmp_path: Path) -> Iterator[Callable[..., SmtpServer]]:
    """``make_smtp_server(tls=True, implicit_tls=False)``: a running server (STARTTLS, SMTPS
    or clear text); stopped at the end of the test."""
    controllers: list[Controller] = []
    password_file = tmp_path / "smtp-password"
    password_file.write_text(PASSWORD + "\n", encoding="utf-8")
    password_file.chmod(0o600)

    def start(*, tls: bool = True, implicit_tls: bool = False) -> SmtpServer:
        server = SmtpServer("127.0.0.1", free_port(),
                            test_certificate.cert_file if tls or implicit_tls else None,
                            password_file, implicit_tls=implicit_tls)
        recorder = _Recorder(server)
        options: dict[str, object] = {}
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(test_certificate.cert_file, test_certificate.key_file)
        if implicit_tls:
            # SMTPS (port 465): the whole connection is TLS, so aiosmtpd's STARTTLS-based
            # "AUTH needs TLS" rule does not apply (auth_required off: it would warn)
            options = {"ssl_context": context, "auth_require_tls": False}
        elif tls:
            # STARTTLS before MAIL and AUTH, as a submission server on port 587 does
            options = {"tls_context": context, "require_starttls": True,
                       "auth_required": True, "auth_require_tls": True}
        else:
            # AUTH offered in clear, so a client that sent it would be seen in auth_attempts
            # (auth_required stays False: aiosmtpd warns about AUTH required without TLS)
            options = {"auth_require_tls": False}
        controller = Controller(recorder, hostname=server.host, port=server.port,
                                authenticator=recorder.authenticate,
                                server_hostname="smtp.test.invalid", **options)
        controller.start()
        controllers.append(controller)
        return server

    yield start
    for controller in controllers:
        controller.stop()


@pytest.fixture
def smtp_server(make_smtp_server: Callable[..., SmtpServer]) -> SmtpServer:
    """A STARTTLS + AUTH server on 127.0.0.1 (see make_smtp_server)."""
    return make_smtp_server()


# --- webhooks ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReceivedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> object:
        return json.loads(self.body)


@dataclass
class WebhookReceiver:
    host: str
    port: int
    scheme: str = "http"
    requests: list[ReceivedRequest] = field(default_factory=list)
    # answers still to give before the 200s: (status, extra headers, body)
    failures: list[tuple[int, dict[str, str], bytes]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, path: str = "/hook") -> str:
        return f"{self.scheme}://{self.host}:{self.port}{path}"

    def fail_next(self, count: int, status: int = 500, headers: dict[str, str] | None = None,
                  body: bytes = b"receiver failure planted by the test") -> None:
        with self.lock:
            self.failures.extend([(status, headers or {}, body)] * count)

    def settings(self, fmt: str = "json", **overrides: object) -> WebhookSettings:
        base: dict[str, object] = {"name": fmt, "url": self.url(f"/{fmt}"), "format": fmt,
                                   "timeout_s": 5.0}
        base.update(overrides)
        return WebhookSettings(**base)  # type: ignore[arg-type]


def _handler_for(receiver: WebhookReceiver) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with receiver.lock:
                receiver.requests.append(ReceivedRequest(
                    "POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                status, extra, reply = (receiver.failures.pop(0) if receiver.failures
                                        else (200, {}, b"ok"))
            self.send_response(status)
            for name, value in extra.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: object) -> None:
            pass  # no request lines on the test output

    return Handler


def _serve(monkeypatch: pytest.MonkeyPatch,
           tls: TestCertificate | None = None) -> Iterator[WebhookReceiver]:
    # urllib honours http_proxy; a proxy of the machine must not stand between test and receiver
    for name in ("no_proxy", "NO_PROXY"):
        monkeypatch.setenv(name, "127.0.0.1,localhost")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    receiver = WebhookReceiver("127.0.0.1", httpd.server_address[1],
                               scheme="https" if tls else "http")
    if tls is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(tls.cert_file, tls.key_file)
        httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    httpd.RequestHandlerClass = _handler_for(receiver)
    # a short poll: shutdown() waits for the loop to look, 0.5 s by default
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                              name="webhook-receiver", daemon=True)
    thread.start()
    yield receiver
    httpd.shutdown()
    httpd.server_close()
    thread.join(5)


@pytest.fixture
def webhook_receiver(monkeypatch: pytest.MonkeyPatch) -> Iterator[WebhookReceiver]:
    """An HTTP receiver on 127.0.0.1 in a thread; stopped at the end of the test."""
    yield from _serve(monkeypatch)


@pytest.fixture
def tls_webhook_receiver(monkeypatch: pytest.MonkeyPatch,
                         test_certificate: TestCertificate) -> Iterator[WebhookReceiver]:
    """The same receiver behind HTTPS with the session's self-signed certificate."""
    yield from _serve(monkeypatch, test_certificate)


@pytest.fixture
def dead_port() -> int:
    """A port on 127.0.0.1 with nothing listening: connections are refused."""
    return free_port()


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts TCP connections (the kernel's backlog) and never says a word."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield listener.getsockname()[1]


# --- alerts -----------------------------------------------------------------------------------


@pytest.fixture
def idle_alert() -> Callable[..., Alert]:
    """``idle_alert(**changes)``: a first idle warning for a Slurm job, with every fact set."""
    def build(**changes: object) -> Alert:
        facts: dict[str, object] = {
            "key": "slurm/alpha/job-1234/idle_first", "kind": "idle_first", "domain": "slurm",
            "cluster": "alpha", "workload": "job 1234 (train-llm)", "node": "gpu-node-07",
            "gpus": ("GPU-0a1b", "GPU-2c3d"),
            "idle_since": dt.datetime(2026, 1, 5, 9, 55), "as_of": dt.datetime(2026, 1, 5, 11, 2),
            "idle_minutes": 67.0, "gpu_hours_idle": 2.23, "cost_so_far": Decimal("5.5750"),
            "currency": "EUR", "person": "Alice Example", "team": "vision",
            "cost_centre": "CC-4711",
            "link": "https://ledger.example.org/incidents?cluster=alpha&job=1234",
            "next_step": None, "action_taken": None,
        }
        facts.update(changes)
        return Alert(**facts)  # type: ignore[arg-type]

    return build
