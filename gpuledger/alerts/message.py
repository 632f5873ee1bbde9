"""What an alert says: one ``Alert`` rendered as an e-mail, a Slack or a Teams message.

The reader is the owner of a job or pod who has never heard of gpuledger, so every message
says in plain words what is held, since when, what it cost, and what to do next.
(docs/alerts-delivery.md)

Job and pod names are chosen by users: they are escaped for Slack's mrkdwn and kept out of
e-mail headers' control characters here, so a name cannot ping a channel or forge a header.
"""

import re
from dataclasses import dataclass, fields
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal

KINDS = ("idle_first", "idle_second", "idle_action", "low_efficiency", "digest")

# Slack: section text is at most 3000 characters and a message at most 50 blocks
# (https://docs.slack.dev/reference/block-kit/blocks/section-block).
SLACK_TEXT_LIMIT = 3000
DIGEST_ROWS_SHOWN = 40


@dataclass(frozen=True)
class Alert:
    """One message to send: an incident (idle, low efficiency, an action) or a digest."""

    key: str                 # the dedupe key of the alert log (gpuledger.alerts, helper A)
    kind: str                # one of KINDS
    domain: str              # "slurm" | "kubernetes"
    cluster: str
    workload: str            # e.g. "job 1234 (train-llm)" or "pod research/train-0"
    node: str | None
    gpus: tuple[str, ...]
    idle_since: datetime | None   # UTC naive
    as_of: datetime          # UTC naive
    idle_minutes: float | None
    gpu_hours_idle: float | None
    cost_so_far: Decimal | None
    currency: str | None
    person: str | None
    team: str | None
    cost_centre: str | None
    link: str | None
    next_step: str | None
    action_taken: str | None
    # digest: (workload, idle GPU-hours, cost)
    digest_rows: tuple[tuple[str, float, Decimal | None], ...] = ()
    # the busy fraction at or below which a sample counts as idle (the site's idle_threshold)
    idle_threshold: float = 0.0


@dataclass(frozen=True)
class Recipients:
    """E-mail addresses: the owner (or the team address) in ``to``, admins in ``cc``."""

    to: tuple[str, ...]
    cc: tuple[str, ...]


_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")


def one_line(text: str) -> str:
    """A user-chosen name on one line: no newline can reach a header or break a layout."""
    return _CONTROL.sub(" ", text).strip()


def duration(minutes: float | None) -> str:
    """``95`` -> ``"1 h 35 min"``; ``None`` -> ``"unknown"``."""
    if minutes is None:
        return "unknown"
    whole = round(minutes)
    if whole < 60:
        return f"{whole} min"
    hours, rest = divmod(whole, 60)
    if hours < 48:
        return f"{hours} h {rest} min" if rest else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h"


def money(amount: Decimal | None, currency: str | None) -> str:
    """``Decimal("12.5"), "EUR"`` -> ``"12.50 EUR"``; no amount -> ``"not priced"``."""
    if amount is None:
        return "not priced"
    if not amount.is_finite():
        return "not priced"
    # half up, as the weekly report rounds (gpuledger/report/pages.py)
    text = f"{amount.quantize(Decimal('0.01'), rounding=ROUND_HALF_UP):,}"
    return f"{text} {currency}" if currency else f"{text} (currency not known)"


def _when(moment: datetime | None) -> str:
    return "unknown" if moment is None else moment.strftime("%Y-%m-%d %H:%M UTC")


def _gpu_list(gpus: tuple[str, ...]) -> str:
    if not gpus:
        return "not known"
    return f"{len(gpus)} ({', '.join(one_line(g) for g in gpus)})"


def _owner(alert: Alert) -> str:
    parts = [p for p in (alert.person, alert.team and f"team {alert.team}",
                         alert.cost_centre and f"cost centre {alert.cost_centre}") if p]
    return ", ".join(one_line(p) for p in parts) if parts else "not known"


def _where(alert: Alert) -> str:
    place = f"cluster {alert.cluster}"
    return f"{place}, node {alert.node}" if alert.node else place


def _headline(alert: Alert) -> str:
    """The first sentence of every rendering."""
    workload = one_line(alert.workload)
    if alert.kind == "digest":
        hours = alert.gpu_hours_idle if alert.gpu_hours_idle is not None else sum(
            r[1] for r in alert.digest_rows)
        return (f"Over the last week, GPUs held by your jobs and pods sat idle for "
                f"{hours:.1f} GPU-hours in total.")
    if alert.kind == "low_efficiency":
        return (f"The GPUs of your {workload} on {_where(alert)} have been mostly unused "
                f"for {duration(alert.idle_minutes)}.")
    if alert.kind == "idle_action":
        return (f"The GPUs of your {workload} on {_where(alert)} were idle for "
                f"{duration(alert.idle_minutes)}, so the site took action.")
    return (f"The GPUs of your {workload} on {_where(alert)} have been idle "
            f"({_idle_use(alert)}) for {duration(alert.idle_minutes)}.")


def _idle_use(alert: Alert) -> str:
    if alert.idle_threshold <= 0:
        return "0 % use"
    return f"at most {alert.idle_threshold * 100:g} % use"



def subject(alert: Alert) -> str:
    """The e-mail subject line (also the first line of chat messages)."""
    workload = one_line(alert.workload)
    if alert.kind == "digest":
        who = one_line(alert.person or alert.team or "you")
        return f"Weekly summary of idle GPUs for {who} ({alert.cluster})"
    prefix = {
        "idle_first": "Idle GPUs",
        "idle_second": "Second notice: idle GPUs",
        "idle_action": "Action taken on idle GPUs",
        "low_efficiency": "Low GPU use",
    }.get(alert.kind, "GPU alert")
    return one_line(f"{prefix}: {workload} on {alert.cluster} "
                     f"({duration(alert.idle_minutes)})")


def facts(alert: Alert) -> list[tuple[str, str]]:
    """Label/value pairs shared by every rendering, in reading order."""
    if alert.kind == "digest":
        rows = [("Who", _owner(alert)), ("Cluster", alert.cluster),
                ("Idle GPU-hours", f"{alert.gpu_hours_idle:.1f}"
                 if alert.gpu_hours_idle is not None else "not known"),
                ("Cost of the idle time", money(alert.cost_so_far, alert.currency)),
                ("Week ending", _when(alert.as_of))]
        return rows
    rows = [
        ("Workload", one_line(alert.workload)),
        ("Cluster", alert.cluster),
        ("Node", one_line(alert.node) if alert.node else "not known"),
        ("GPUs", _gpu_list(alert.gpus)),
        ("Idle since", _when(alert.idle_since)),
        ("Idle for", duration(alert.idle_minutes)),
    ]
    if alert.gpu_hours_idle is not None:
        rows.append(("Idle GPU-hours", f"{alert.gpu_hours_idle:.2f}"))
    rows += [
        ("Cost so far", money(alert.cost_so_far, alert.currency)),
        ("Owner", _owner(alert)),
        ("Checked at", _when(alert.as_of)),
    ]
    return rows


def _next_step(alert: Alert) -> str:
    if alert.next_step:
        return alert.next_step
    if alert.kind == "digest":
        return "Please check that jobs release their GPUs when they are done."
    if alert.domain == "kubernetes":
        return ("If the GPUs are not needed, please delete the pod or its job so others can "
                "use them.")
    return "If the GPUs are not needed, please cancel the job (scancel) so others can use them."


def digest_lines(alert: Alert, currency: str | None) -> list[str]:
    """One line per digest row (the most idle first), cut at DIGEST_ROWS_SHOWN."""
    ordered = sorted(alert.digest_rows, key=lambda r: -r[1])
    lines = [f"{one_line(w)}: {h:.1f} idle GPU-hours, {money(c, currency)}"
             for w, h, c in ordered[:DIGEST_ROWS_SHOWN]]
    if len(ordered) > DIGEST_ROWS_SHOWN:
        lines.append(f"... and {len(ordered) - DIGEST_ROWS_SHOWN} more")
    return lines


def plain_text(alert: Alert) -> str:
    """The e-mail body: a greeting, the facts, the next step, the link."""
    greeting = f"Hello {one_line(alert.person)}," if alert.person else "Hello,"
    out = [greeting, "", _headline(alert), ""]
    width = max(len(label) for label, _ in facts(alert))
    out += [f"  {label + ':':<{width + 1}} {value}" for label, value in facts(alert)]
    if alert.kind == "digest" and alert.digest_rows:
        out += ["", "Jobs and pods with idle GPUs:"]
        out += [f"  - {line}" for line in digest_lines(alert, alert.currency)]
    if alert.action_taken:
        out += ["", f"Action taken: {alert.action_taken}"]
    out += ["", f"What to do: {_next_step(alert)}"]
    if alert.link:
        out += ["", f"Details: {alert.link}"]
    out += ["", "If the GPUs are busy in a way this check cannot see, or you have questions,",
            "please contact your cluster administrators.",
            "", "-- ", "Sent automatically by gpuledger, the GPU-hour ledger of this site.",
            f"Reference: {alert.key}", ""]
    return "\n".join(out)


# --- Slack ------------------------------------------------------------------------------------
# Sources (checked with the search tool, 2026-12):
# - the body: https://api.slack.com/messaging/webhooks (POST {"text": ..., "blocks": [...]};
#   with blocks, "text" is the fallback shown in notifications);
# - escaping: https://api.slack.com/reference/surfaces/formatting#escaping (slackhq/slack-api-docs
#   page_formatting.md: "three characters you must convert to HTML entities and only three:
#   &, <, and >"); links are <url|label>;
# - limits: a section's text is at most 3000 characters, a message at most 50 blocks.


def slack_escape(text: str) -> str:
    """Slack's three control characters as entities, so ``<!channel>`` in a job name is text."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _slack_section(text: str) -> dict:
    if len(text) > SLACK_TEXT_LIMIT:
        text = text[: SLACK_TEXT_LIMIT - 1] + "…"
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _slack_link(url: str) -> str:
    # inside <...|...> a "|" or ">" would end the link early
    return slack_escape(url).replace("|", "%7C")


def slack_payload(alert: Alert) -> dict:
    """A Slack incoming-webhook message: ``text`` (notifications) and section ``blocks``."""
    esc = slack_escape
    blocks = [
        _slack_section(f"*{esc(subject(alert))}*\n{esc(_headline(alert))}"),
        _slack_section("\n".join(f"*{esc(label)}:* {esc(value)}"
                                 for label, value in facts(alert))),
    ]
    if alert.kind == "digest" and alert.digest_rows:
        blocks.append(_slack_section("\n".join(
            f"• {esc(line)}" for line in digest_lines(alert, alert.currency))))
    if alert.action_taken:
        blocks.append(_slack_section(f"*Action taken:* {esc(alert.action_taken)}"))
    step = f"*What to do:* {esc(_next_step(alert))}"
    if alert.link:
        step += f"\n<{_slack_link(alert.link)}|Open the incident on the dashboard>"
    blocks.append(_slack_section(step))
    blocks.append({"type": "context", "elements": [
        {"type": "mrkdwn", "text": esc(f"gpuledger · {alert.key}")}]})
    return {"text": esc(f"{subject(alert)}: {_headline(alert)}"), "blocks": blocks}


# --- Microsoft Teams --------------------------------------------------------------------------
# Sources (checked with the search tool, 2026-12):
# - MicrosoftDocs/msteams-docs, webhooks-and-connectors/how-to/connectors-using.md, "Send adaptive
#   cards using an incoming webhook": "type" must be "message", "attachments" holds the cards,
#   "contentType" is application/vnd.microsoft.card.adaptive, "content" is the card
#   ("contentUrl": null in its example); Action.OpenUrl is supported, Action.Submit is not.
#   The Workflows app's "Post to a channel when a webhook request is received" reads the same.
# - the card schema: https://adaptivecards.io/explorer/ (TextBlock, FactSet, Action.OpenUrl);
#   Teams renders version 1.4.

ADAPTIVE_CARD = "application/vnd.microsoft.card.adaptive"


def teams_escape(text: str) -> str:
    """Teams renders a subset of Markdown in TextBlocks and facts, and backslash escapes are not
    reliably honoured there: a job name such as ``[x](https://evil)`` is kept from becoming a
    link by breaking the ``](`` that links need; ``*`` and ``_`` are left (at worst a name
    shows in italics)."""
    return text.replace("](", "] (")


def teams_payload(alert: Alert) -> dict:
    """A Teams incoming-webhook / Workflows message carrying one Adaptive Card."""
    esc = teams_escape
    body: list[dict] = [
        {"type": "TextBlock", "text": esc(subject(alert)), "weight": "Bolder", "size": "Medium",
         "wrap": True},
        {"type": "TextBlock", "text": esc(_headline(alert)), "wrap": True},
        {"type": "FactSet", "facts": [{"title": label, "value": esc(value)}
                                      for label, value in facts(alert)]},
    ]
    if alert.kind == "digest" and alert.digest_rows:
        body.append({"type": "TextBlock", "wrap": True, "text": "\n\n".join(
            esc(line) for line in digest_lines(alert, alert.currency))})
    if alert.action_taken:
        body.append({"type": "TextBlock", "wrap": True,
                     "text": f"**Action taken:** {esc(alert.action_taken)}"})
    body.append({"type": "TextBlock", "wrap": True,
                 "text": f"**What to do:** {esc(_next_step(alert))}"})
    body.append({"type": "TextBlock", "wrap": True, "isSubtle": True, "size": "Small",
                 "text": esc(f"gpuledger · {alert.key}")})
    card: dict = {
        "type": "AdaptiveCard",
        "version": "1.4",
        "$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
        "body": body,
        "actions": [],
    }
    if alert.link:
        card["actions"].append({"type": "Action.OpenUrl", "title": "Open on the dashboard",
                                "url": alert.link})
    return {"type": "message", "attachments": [
        {"contentType": ADAPTIVE_CARD, "contentUrl": None, "content": card}]}


# --- plain JSON -------------------------------------------------------------------------------


def _plain(value: object) -> object:
    if isinstance(value, datetime):
        return value.isoformat() + "Z"  # the fields are UTC naive
    if isinstance(value, Decimal):
        return str(value)  # exact: a float would round money
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


def json_payload(alert: Alert) -> dict:
    """The ``json`` webhook format: every Alert field (datetimes ISO 8601 UTC with ``Z``,
    amounts as decimal strings), plus ``subject`` and ``text`` for receivers that show a line
    (Mattermost and Rocket.Chat read ``text``)."""
    out = {f.name: _plain(getattr(alert, f.name)) for f in fields(alert)}
    out["subject"] = subject(alert)
    out["text"] = plain_text(alert)
    return out
