"""sreport text, the Kueue Workload snapshot, decoys and the static world files."""

import json
from collections import defaultdict
from datetime import datetime
from pathlib import Path

from tests.simulate.conftest import read_csv

RULE = "-" * 80


def _ts(text: str) -> int:
    return int(datetime.fromisoformat(text.replace("Z", "") + "+00:00").timestamp())


def _slurm_seconds(world_dir: Path) -> dict[tuple[str, str], int]:
    """GPU-seconds per (account, user) from the sacct dump, clipped to the window."""
    doc = json.loads((world_dir / "world.json").read_text(encoding="utf-8"))
    w0, w1 = _ts(doc["window"]["start"]), _ts(doc["window"]["end"])
    lines = (world_dir / "sacct" / "sacct-unitsep-epoch.txt").read_text(
        encoding="utf-8").splitlines()
    header = lines[0].split("\x1f")
    out: dict[tuple[str, str], int] = defaultdict(int)
    for line in lines[1:]:
        row = dict(zip(header, line.split("\x1f"), strict=True))
        if "." in row["JobID"] or not row["Start"].isdigit():
            continue
        gpus = next((int(p.split("=")[1]) for p in row["AllocTRES"].split(",")
                     if p.startswith("gres/gpu=")), 0)
        end = w1 if row["End"] == "Unknown" else int(row["End"])
        seconds = gpus * max(0, min(end, w1) - max(int(row["Start"]), w0))
        out[(row["Account"], row["User"])] += seconds
    return out


def test_sreport_utilization_banner_and_numbers(world_dir: Path):
    lines = (world_dir / "sreport" / "cluster-utilization.txt").read_text(
        encoding="utf-8").splitlines()
    assert lines[0] == RULE
    assert lines[3] == RULE
    assert lines[1] == "Cluster Utilization 2026-01-05T00:00:00 - 2026-01-06T23:59:59"
    assert lines[2] == "Usage reported in TRES Seconds"
    assert lines[4] == "Cluster|TRES Name|Allocated|Down|PLND Down|Idle|Planned|Reported"
    cluster, tres, alloc, down, pdown, idle, planned, reported = lines[5].split("|")
    assert (cluster, tres) == ("gpulab", "gres/gpu")
    assert int(alloc) == sum(_slurm_seconds(world_dir).values())
    assert int(alloc) + int(down) + int(pdown) + int(idle) + int(planned) == int(reported)
    slurm_gpus = sum(1 for r in read_csv(world_dir / "nodes.csv") if r["slurm_partition"])
    assert int(reported) == slurm_gpus * 2 * 86_400
    assert len(lines) == 6


def test_sreport_account_tree(world_dir: Path):
    lines = (world_dir / "sreport" / "account-utilization-by-user.txt").read_text(
        encoding="utf-8").splitlines()
    assert lines[1] == ("Cluster/Account/User Utilization 2026-01-05T00:00:00 - "
                        "2026-01-06T23:59:59 (172800 secs)")
    assert lines[4] == "Cluster|Account|Login|Proper Name|TRES Name|Used"
    rows = [line.split("|") for line in lines[5:]]
    assert rows[0][1:3] == ["root", ""]
    used = {(r[1], r[2]): int(r[5]) for r in rows}
    truth = _slurm_seconds(world_dir)
    for (account, user), seconds in truth.items():
        assert used[(account, user)] == seconds
    parents = {r["account"]: r["parent"] for r in read_csv(world_dir / "accounts.csv")}
    for account in parents:
        children = [a for a, p in parents.items() if p == account]
        users = [u for (a, u) in used if a == account and u]
        assert used[(account, "")] == sum(used[(account, u)] for u in users) + sum(
            used[(c, "")] for c in children)
    assert used[("root", "")] == sum(truth.values())
    order = [r[1] for r in rows if not r[2]]
    assert order == ["root", "kubernetes", "ops", "research", "ml-research", "physics"]


def test_workload_snapshot(world_dir: Path):
    text = (world_dir / "kueue" / "workloads.json").read_text(encoding="utf-8")
    doc = json.loads(text)
    assert doc["apiVersion"] == "v1"
    assert doc["kind"] == "List"
    items = doc["items"]
    keys = [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in items]
    assert keys == sorted(keys)  # kubectl lists by namespace, then name
    reasons = set()
    for item in items:
        assert item["kind"] == "Workload"
        meta, spec, status = item["metadata"], item["spec"], item["status"]
        assert meta["uid"]
        assert meta["ownerReferences"]
        assert spec["queueName"]
        assert spec["podSets"][0]["count"] >= 1
        types = [c["type"] for c in status["conditions"]]
        assert len(types) == len(set(types))
        for c in status["conditions"]:
            assert c["status"] in ("True", "False")
            assert c["lastTransitionTime"].endswith("Z")
            if c["type"] == "Evicted":
                reasons.add(c["reason"] if c["status"] == "True" else c["message"])
        if "admission" in status:
            assert status["admission"]["clusterQueue"].startswith("cq-")
    assert any("PodsReadyTimeout" in r or "PodsReady timeout" in r for r in reasons)
    assert any("Preempted" in r for r in reasons)
    assert any("requeueState" in i["status"] for i in items)
    assert any(c["type"] == "PodsReady" and c["status"] == "True"
               for i in items for c in i["status"]["conditions"])
    waited = 0
    for item in items:
        conditions = {c["type"]: c for c in item["status"]["conditions"]}
        reserved = conditions.get("QuotaReserved")
        if "admission" not in item["status"] and "Finished" not in conditions:
            assert reserved is not None, item["metadata"]["name"]
            assert (reserved["status"], reserved["reason"]) == ("False", "Pending")
        elif reserved is not None and reserved["status"] == "True":
            created = _ts(item["metadata"]["creationTimestamp"])
            waited += _ts(reserved["lastTransitionTime"]) - created > 60
    assert waited, "expected some workloads to queue before admission"


def test_decoys_are_not_incidents(world_dir: Path):
    doc = json.loads((world_dir / "world.json").read_text(encoding="utf-8"))
    decoys = {d["kind"]: d for d in doc["decoys"]}
    assert set(decoys) == {"clean_handover", "warmup"}
    incidents = read_csv(world_dir / "truth" / "incidents.csv")
    for decoy in decoys.values():
        for inc in incidents:
            assert not set(decoy["gpu_uuids"]) & set(inc["gpu_uuids"].split(";")) or \
                _ts(inc["end"]) <= _ts(decoy["at"]) or _ts(inc["start"]) >= _ts(decoy["at"]) + 3600
    rows = read_csv(world_dir / "truth" / "allocations.csv")
    clean = decoys["clean_handover"]
    job = next(r for r in rows if r["source_key"] == clean["slurm_job"])
    pod = next(r for r in rows if r["source_key"] == clean["pod"])
    assert job["end"] == pod["start"] == clean["at"]
    assert set(clean["gpu_uuids"]) <= set(job["gpu_uuids"].split(";"))


def test_static_files(world_dir: Path):
    nodes = read_csv(world_dir / "nodes.csv")
    assert {r["pool"] for r in nodes} == {"slurm", "kubernetes", "shared"}
    assert {r["gpu_model"] for r in nodes} == {"a100", "h100"}
    assert len({r["gpu_uuid"] for r in nodes}) == len(nodes)
    assert all(r["gpu_uuid"].startswith("GPU-") and len(r["gpu_uuid"]) == 40 for r in nodes)
    identity = read_csv(world_dir / "identity_map.csv")
    kinds = {r["source_kind"] for r in identity}
    assert kinds == {"slurm_user", "slurm_account", "k8s_namespace", "k8s_service_account",
                     "kueue_queue", "pod_label"}
    assert any(r["valid_from"] == "2026-01-06" for r in identity)
    assert any(r["valid_to"] == "2026-01-06" for r in identity)
    rates = read_csv(world_dir / "rate_card.csv")
    assert {r["domain"] for r in rates} == {"slurm", "kubernetes"}
    doc = json.loads((world_dir / "world.json").read_text(encoding="utf-8"))
    assert doc["window"] == {"start": "2026-01-05T00:00:00Z", "end": "2026-01-07T00:00:00Z"}
    assert doc["sacct_timezone"] == "Europe/Berlin"
    assert doc["cluster"] == "gpulab"
