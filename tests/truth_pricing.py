"""The simulator's truth priced with its rate card, independently of models/sql/chargeback.sql.

The rule read from docs/accounting.md: the rate valid that day for the GPU model; a
domain-specific rate beats a QOS-specific one beats a generic one; then the latest
``valid_from``; amounts summed per invoice line and rounded half up once per line.
"""

import csv
from collections import defaultdict
from datetime import date
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

CENT = Decimal("0.01")
Line = tuple[str, str, str, str, str, str, Decimal]  # period, cc, team, person, domain, model, rate


def rate_card(world: Path) -> list[dict]:
    with (world / "rate_card.csv").open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        r["valid_from"] = date.fromisoformat(r["valid_from"]) if r["valid_from"] else None
        r["valid_to"] = date.fromisoformat(r["valid_to"]) if r["valid_to"] else None
        r["rate"] = Decimal(r["rate_per_gpu_hour"])
    return rows


def _rate(card: list[dict], day: date, domain: str, model: str, qos: str) -> Decimal | None:
    fits = [
        r for r in card
        if r["gpu_model"] == model and r["domain"] in ("", domain) and r["qos"] in ("", qos)
        and (r["valid_from"] is None or r["valid_from"] <= day)
        and (r["valid_to"] is None or day < r["valid_to"])
    ]
    if not fits:
        return None
    best = max(fits, key=lambda r: ((r["domain"] != "") * 2 + (r["qos"] != ""),
                                    r["valid_from"] or date.min))
    return best["rate"]


def _period(day: date, kind: str) -> str:
    if kind == "day":
        return day.isoformat()
    if kind == "week":
        year, week, _ = day.isocalendar()
        return f"{year}-W{week:02d}"
    return f"{day:%Y-%m}"


def truth_lines(world: Path, kind: str, domain: str) -> dict[Line, tuple[int, Decimal]]:
    """(invoice line) -> (GPU-seconds, amount) from the truth and the rate card."""
    card = rate_card(world)
    seconds: dict[Line, int] = defaultdict(int)
    with (world / "truth" / "gpu_seconds_priced.csv").open(newline="") as fh:
        for r in csv.DictReader(fh):
            if r["domain"] != domain:
                continue
            day = date.fromisoformat(r["day"])
            rate = _rate(card, day, r["domain"], r["gpu_model"], r["qos"])
            assert rate is not None, f"the world's rate card prices every GPU model: {r}"
            line = (_period(day, kind), r["cost_centre"], r["team"], r["person"], r["domain"],
                    r["gpu_model"], rate)
            seconds[line] += int(r["gpu_seconds"])
    return {
        line: (s, (Decimal(s) * line[-1] / 3600).quantize(CENT, rounding=ROUND_HALF_UP))
        for line, s in seconds.items()
    }


def kubernetes_amount_bound(world: Path) -> dict[str, Decimal]:
    """cost centre -> the most its Kubernetes amount may differ from the truth.

    Pod intervals come from samples Δ apart: each end is late by less than Δ, so a pod's
    GPU-seconds are off by less than 2 x GPUs x Δ, priced at the highest Kubernetes rate of its
    GPU model, plus half a cent per invoice line for rounding (tests/models/test_k8s_truth.py).
    """
    import json

    step = json.loads((world / "world.json").read_text())["scrape"]["step_seconds"]
    card = rate_card(world)
    top: dict[str, Decimal] = {}
    for r in card:
        if r["domain"] in ("", "kubernetes") and r["qos"] == "":
            top[r["gpu_model"]] = max(top.get(r["gpu_model"], Decimal(0)), r["rate"])
    with (world / "nodes.csv").open(newline="") as fh:
        model = {r["node"]: r["gpu_model"] for r in csv.DictReader(fh)}
    bound: dict[str, Decimal] = defaultdict(Decimal)
    with (world / "truth" / "allocations.csv").open(newline="") as fh:
        for r in csv.DictReader(fh):
            if r["domain"] == "kubernetes" and r["charged"] == "true":
                seconds = 2 * int(r["gpus"]) * step
                bound[r["cost_centre"]] += Decimal(seconds) * top[model[r["node"]]] / 3600
    lines = len(truth_lines(world, "week", "kubernetes"))
    return {cc: b + CENT * lines for cc, b in bound.items()}
