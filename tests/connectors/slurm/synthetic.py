"""Synthetic sacct dumps shaped like real Slurm 22.05 output (for the throughput benchmark).

``write_dump(path, n_lines)`` writes the contract's extraction (``SACCT_FIELDS`` order, unit
separator, epoch times): per job an allocation row, ``.batch`` and ``.extern`` and now and then
``srun`` steps, arrays and requeued runs. Deterministic (seeded).
"""

from __future__ import annotations

import random
from pathlib import Path

from connectors.slurm.fields import SACCT_FIELDS

_USERS = [("alice", 20001), ("bob", 20002), ("carol", 20003), ("dave", 20004)]
_ACCOUNTS = ["physics", "ml-research", "ops", "chem"]
_NAMES = ["train-small", "finetune", "モデル学習-ü-🚀", "llm-eval", "eval, `v2` run", "sweep"]


def _row(values: dict[str, str], sep: str) -> str:
    return sep.join(values.get(f, "") for f in SACCT_FIELDS)


def dump_lines(n_lines: int, *, sep: str = "\x1f", seed: int = 7, cluster: str = "synth"):
    """Yield the header and then about ``n_lines`` data lines (stops at exactly n_lines)."""
    rng = random.Random(seed)
    yield sep.join(SACCT_FIELDS)
    emitted = 0
    job = 1000
    t0 = 1_767_225_600  # 2026-01-01T00:00:00Z
    while emitted < n_lines:
        job += 1
        user, uid = rng.choice(_USERS)
        account = rng.choice(_ACCOUNTS)
        gpus = rng.choice([0, 1, 1, 2, 4, 8, 16])
        model = rng.choice(["a100", "h100"])
        nodes = 2 if gpus == 16 else 1
        node_no = rng.randint(1, 60)
        nodelist = (f"{model}-[{node_no:02d}-{node_no + 1:02d}]" if nodes == 2
                    else f"{model}-{node_no:02d}")
        cpus = max(2, gpus * 4)
        submit = t0 + job * 7
        start = submit + rng.randint(0, 600)
        elapsed = rng.randint(1, 86_400)
        end = start + elapsed
        gres = f"gres/gpu:{model}={gpus},gres/gpu={gpus}," if gpus else ""
        mem = f"{cpus * 1000}M"
        alloc = f"billing={cpus * 3},cpu={cpus},{gres}mem={mem},node={nodes}"
        req = f"billing={cpus * 3},cpu={cpus // 2},{gres}mem={mem},node={nodes}"
        state = rng.choice(["COMPLETED"] * 6 + ["FAILED", "TIMEOUT", "CANCELLED by 20001"])
        exit_code = "1:0" if state == "FAILED" else "0:0"
        array = rng.random() < 0.1
        job_id = f"{job}_{rng.randint(0, 9)}" if array else str(job)
        bridge = rng.random() < 0.05
        base = {
            "JobID": job_id, "JobIDRaw": str(job), "User": "slurm" if bridge else user,
            "UID": str(uid), "Account": account, "Partition": "gpu", "QOS": "normal",
            "State": state, "ExitCode": exit_code, "DerivedExitCode": "0:0",
            "Submit": str(submit), "Eligible": str(submit), "Start": str(start),
            "End": str(end), "Elapsed": "", "ElapsedRaw": str(elapsed), "TimelimitRaw": "1440",
            "AllocCPUS": str(cpus), "AllocNodes": str(nodes), "NodeList": nodelist,
            "AllocTRES": alloc, "ReqTRES": req, "Cluster": cluster, "Reservation": "",
            "Reason": "None", "Flags": "SchedMain,StartRecieved", "WCKey": "",
            "JobName": rng.choice(_NAMES),
            "AdminComment": f'{{"pods":["team-a/pod-{job}"]}}' if bridge else "",
        }
        h, rem = divmod(elapsed, 3600)
        base["Elapsed"] = f"{h:02d}:{rem // 60:02d}:{rem % 60:02d}"
        rows = [base]
        for step in ("batch", "extern", *(str(i) for i in range(rng.choice([0, 0, 1, 3])))):
            rows.append({
                **base, "JobID": f"{job_id}.{step}", "JobIDRaw": f"{job}.{step}", "User": "",
                "UID": "", "Partition": "", "QOS": "", "DerivedExitCode": "",
                "TimelimitRaw": "", "JobName": step if not step.isdigit() else "python",
                "State": "COMPLETED", "ExitCode": "0:0", "Reason": "", "Flags": "",
                "AdminComment": "", "ReqTRES": "",
            })
        for r in rows:
            if emitted >= n_lines:
                return
            yield _row(r, sep)
            emitted += 1


def write_dump(path: Path, n_lines: int, *, sep: str = "\x1f", seed: int = 7) -> Path:
    with path.open("w", encoding="utf-8") as fh:
        for line in dump_lines(n_lines, sep=sep, seed=seed):
            fh.write(line)
            fh.write("\n")
    return path
