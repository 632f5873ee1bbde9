"""Send one alert on every configured channel (docs/alerts-delivery.md).

``deliver`` never raises for a channel's failure: each channel gives a ``DeliveryResult``
(``ok=False`` with the error in words), so a dead SMTP server does not keep the webhook from
getting its message. Transient errors are retried with backoff inside the channel's timeout,
so one channel takes at most about ``timeout_s`` in all.

No ledger connection may be open while this runs (the rule of docs/contracts.md): the caller
reads what to send, closes the ledger, delivers, then writes the results.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from gpuledger.alerts import smtp, webhook
from gpuledger.alerts.delivery_config import (
    DeliverySettings,
    SecretFileError,
    SmtpSettings,
    WebhookSettings,
)
from gpuledger.alerts.message import Alert, Recipients

ATTEMPTS = 3
FIRST_BACKOFF_S = 0.5

T = TypeVar("T")


@dataclass(frozen=True)
class DeliveryResult:
    """What happened on one channel: ``"email"`` or ``"webhook:<name>"``."""

    channel: str
    ok: bool
    detail: str


class _GaveUpError(Exception):
    def __init__(self, last: BaseException, attempts: int) -> None:
        super().__init__(str(last))
        self.last, self.attempts = last, attempts


def with_retries(attempt: Callable[[float], T], *, timeout_s: float,
                 transient: Callable[[BaseException], bool],
                 wait_hint: Callable[[BaseException], float | None] = lambda _exc: None,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> tuple[T, int]:
    """Run ``attempt(seconds_left)`` up to ATTEMPTS times while its error is transient and
    the next try still fits in ``timeout_s``. Returns (result, attempts made)."""
    deadline = clock() + timeout_s
    backoff = FIRST_BACKOFF_S
    for number in range(1, ATTEMPTS + 1):
        left = deadline - clock()
        try:
            return attempt(max(left, 0.05)), number
        except Exception as exc:
            wait = wait_hint(exc)
            wait = backoff if wait is None else wait
            left = deadline - clock()
            # another try needs its wait and some time to talk to the server
            if number == ATTEMPTS or not transient(exc) or wait + 0.1 >= left:
                raise _GaveUpError(exc, number) from exc
            sleep(wait)
            backoff *= 2
    unreachable = "with_retries ran out of attempts without returning or raising"
    raise AssertionError(unreachable)  # pragma: no cover


def _tries(attempts: int) -> str:
    return "" if attempts == 1 else f" after {attempts} attempts"


def send_email(alert: Alert, recipients: Recipients, settings: SmtpSettings) -> DeliveryResult:
    """The e-mail channel: To and Cc of ``recipients``; the envelope holds both."""
    bad = [a for a in (*recipients.to, *recipients.cc) if not smtp.valid_address(a)]
    if bad:
        return DeliveryResult("email", False, f"not an e-mail address: {bad[0]!r}; nothing sent")
    envelope = list(dict.fromkeys((*recipients.to, *recipients.cc)))
    if not envelope:
        return DeliveryResult("email", False,
                              "no e-mail address for this alert (no person, team or admin "
                              "address); nothing sent")
    msg = smtp.build_email(alert, recipients, settings)
    try:
        refused, attempts = with_retries(
            lambda left: smtp.send_once(msg, envelope, settings, min(left, settings.timeout_s)),
            timeout_s=settings.timeout_s, transient=smtp.is_transient)
    except _GaveUpError as gave_up:
        return DeliveryResult("email", False,
                              smtp.describe(gave_up.last, settings) + _tries(gave_up.attempts))
    delivered = [a for a in envelope if a not in refused]
    detail = f"sent to {', '.join(delivered)} via {settings.host}:{settings.port}"
    if refused:
        # the others have the message: a retry would send them a second copy
        detail += "; refused: " + ", ".join(
            f"{a} ({code} {smtp.reply_text(m)})" for a, (code, m) in refused.items())
    return DeliveryResult("email", True, detail + _tries(attempts))


def send_webhook(alert: Alert, settings: WebhookSettings) -> DeliveryResult:
    """One webhook channel, with the body in its ``format``."""
    channel = f"webhook:{settings.name}"
    body = webhook.body_bytes(alert, settings)
    try:
        answer, attempts = with_retries(
            lambda left: webhook.post_once(body, settings, min(left, settings.timeout_s)),
            timeout_s=settings.timeout_s, transient=webhook.is_transient,
            wait_hint=webhook.retry_after)
    except _GaveUpError as gave_up:
        detail = webhook.describe(gave_up.last, settings) + _tries(gave_up.attempts)
        return DeliveryResult(channel, False, _redact(detail, settings))
    return DeliveryResult(channel, True, f"{settings.format} message accepted: {answer}"
                          + _tries(attempts))


def _redact(detail: str, settings: WebhookSettings) -> str:
    """Whatever an error quoted, the URL (a secret) does not reach the log."""
    try:
        url = settings.resolved_url()
    except (SecretFileError, ValueError):
        return detail
    return detail.replace(url, "<webhook URL>") if url else detail


def deliver(alert: Alert, recipients: Recipients,
            settings: DeliverySettings) -> list[DeliveryResult]:
    """E-mail (when ``settings.smtp`` is set) and every webhook; one result per channel,
    in that order. A channel's bug is its own failed result, not an exception."""
    results = []
    if settings.smtp is not None:
        results.append(_guarded("email", lambda: send_email(alert, recipients, settings.smtp)))
    for hook in settings.webhooks:
        results.append(_guarded(f"webhook:{hook.name}",
                                lambda hook=hook: send_webhook(alert, hook)))
    return results


def _guarded(channel: str, send: Callable[[], DeliveryResult]) -> DeliveryResult:
    try:
        return send()
    except Exception as exc:  # the other channels must still be tried
        return DeliveryResult(channel, False, f"unexpected {type(exc).__name__}: {exc}")
