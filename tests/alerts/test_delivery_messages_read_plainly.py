"""What each kind of alert says, in words a person who never heard of gpuledger understands:
the subject per kind, the action and the next step, the digest's rows, and the limits of
Slack's blocks."""

from decimal import Decimal

import pytest

from gpuledger.alerts.message import (
    DIGEST_ROWS_SHOWN,
    SLACK_TEXT_LIMIT,
    duration,
    money,
    plain_text,
    slack_payload,
    subject,
    teams_payload,
)


@pytest.mark.parametrize(("minutes", "text"), [
    (None, "unknown"), (0.4, "0 min"), (45, "45 min"), (60, "1 h"), (105.2, "1 h 45 min"),
    (47 * 60 + 59, "47 h 59 min"), (50 * 60 + 10, "2 d 2 h"),
])
def test_idle_time_reads_in_minutes_hours_and_days(minutes, text):
    assert duration(minutes) == text


@pytest.mark.parametrize(("amount", "currency", "text"), [
    (None, "EUR", "not priced"), (None, None, "not priced"),
    (Decimal("1234.565"), "USD", "1,234.57 USD"),  # half up, as the weekly report rounds
    (Decimal("0.004"), "CHF", "0.00 CHF"), (Decimal(3), None, "3.00 (currency not known)"),
])
def test_cost_reads_as_amount_and_currency_or_not_priced(amount, currency, text):
    assert money(amount, currency) == text


@pytest.mark.parametrize(("kind", "start"), [
    ("idle_first", "Idle GPUs: job 1234 (train-llm) on alpha (1 h 7 min)"),
    ("idle_second", "Second notice: idle GPUs: job 1234"),
    ("idle_action", "Action taken on idle GPUs: job 1234"),
    ("low_efficiency", "Low GPU use: job 1234"),
    ("digest", "Weekly summary of idle GPUs for Alice Example (alpha)"),
])
def test_subject_says_which_kind_of_message_it_is(idle_alert, kind, start):
    assert subject(idle_alert(kind=kind)).startswith(start)


def test_action_taken_and_site_next_step_are_in_every_rendering(idle_alert):
    alert = idle_alert(kind="idle_action", action_taken="job cancelled with scancel 1234",
                       next_step="Resubmit with --time=2:00 if you still need the GPUs.")
    text = plain_text(alert)
    slack = str(slack_payload(alert))
    teams = str(teams_payload(alert))
    for rendering in (text, slack, teams):
        assert "job cancelled with scancel 1234" in rendering
        assert "Resubmit with --time=2:00" in rendering
    assert "so the site took action" in text
    assert "cancel the job (scancel)" not in text, "the site's next step replaces the default"


def test_low_efficiency_says_mostly_unused_not_idle(idle_alert):
    text = plain_text(idle_alert(kind="low_efficiency"))
    assert "mostly unused for 1 h 7 min" in text
    assert "idle (0 % use)" not in text


def test_a_site_idle_threshold_above_zero_is_said_not_zero_percent(idle_alert):
    assert "idle (0 % use) for" in plain_text(idle_alert())
    text = plain_text(idle_alert(idle_threshold=0.05))
    assert "idle (at most 5 % use) for" in text
    assert "0 % use" not in text


def test_unknown_node_and_owner_say_not_known(idle_alert):
    text = plain_text(idle_alert(node=None, person=None, team=None, cost_centre=None, gpus=()))
    assert text.startswith("Hello,\n")
    assert "Node:           not known" in text
    assert "Owner:          not known" in text
    assert "GPUs:           not known" in text


def test_digest_lists_rows_most_idle_first_with_cost(idle_alert):
    rows = (("job 1 (small)", 1.5, Decimal("3")), ("pod ns/big", 20.25, None),
            ("job 2 (mid)", 7.0, Decimal("14.5")))
    alert = idle_alert(kind="digest", digest_rows=rows, gpu_hours_idle=28.75,
                       cost_so_far=Decimal("17.5"))
    text = plain_text(alert)

    assert "sat idle for 28.8 GPU-hours in total" in text
    listed = [line for line in text.splitlines() if line.startswith("  - ")]
    assert listed == ["  - pod ns/big: 20.2 idle GPU-hours, not priced",
                      "  - job 2 (mid): 7.0 idle GPU-hours, 14.50 EUR",
                      "  - job 1 (small): 1.5 idle GPU-hours, 3.00 EUR"]
    assert "Cost of the idle time: 17.50 EUR" in text


def test_long_digest_is_cut_and_stays_inside_slacks_limits(idle_alert):
    rows = tuple((f"job {i} ({'x' * 80})", float(i), Decimal(i)) for i in range(300))
    alert = idle_alert(kind="digest", digest_rows=rows)

    text = plain_text(alert)
    assert f"... and {300 - DIGEST_ROWS_SHOWN} more" in text
    assert "job 299 (" in text
    assert "job 0 (" not in text
    body = slack_payload(alert)
    assert len(body["blocks"]) <= 50
    assert all(len(b["text"]["text"]) <= SLACK_TEXT_LIMIT
               for b in body["blocks"] if b["type"] == "section")
