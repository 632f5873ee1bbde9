"""`scontrol -o show node` lines -> GPU nodes (connectors/slurm/scontrol_nodes.py).

Line shapes (each written after a published output, sources beside them): GRES with and without
types, socket suffixes, a MIG profile as a type, non-GPU GRES, values with spaces, unreadable
lines (kept as rejects).
"""

import pytest

from connectors.slurm.scontrol_nodes import pairs, parse_gres, parse_scontrol_nodes

# Slurm 22.05 as the suite's real cluster prints it (tests/services/slurm/start-slurm.sh config)
REAL_2205 = (
    "NodeName=a100-01 Arch=x86_64 CoresPerSocket=1 CPUAlloc=0 CPUEfctv=8 CPUTot=8 CPULoad=0.12 "
    "AvailableFeatures=(null) ActiveFeatures=(null) Gres=gpu:a100:8 NodeAddr=127.0.0.1 "
    "NodeHostName=localhost Port=6831 Version=22.05.8 OS=Linux 6.1.0-18-amd64 #1 SMP "
    "PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01) RealMemory=8000 AllocMem=0 FreeMem=5000 "
    "Sockets=8 Boards=1 State=IDLE ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A "
    "Partitions=gpu BootTime=2026-01-05T08:00:00 SlurmdStartTime=2026-01-05T08:01:00 "
    "LastBusyTime=2026-01-05T09:00:00 CfgTRES=cpu=8,mem=8000M,billing=8,gres/gpu=8 AllocTRES= "
    "CapWatts=n/a CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 "
    "ExtSensorsTemp=n/s"
)
# Gres with socket suffix and a second, non-GPU GRES (a site's notes: "Gres=gpu:A100:4(S:0-1),
# lscratch:3570"); Reason holding spaces and another NodeName= (a drained node's ticket text)
SOCKETS = ("NodeName=gpu02 CPUTot=64 Gres=gpu:A100:4(S:0-1),lscratch:3570 State=DRAIN "
           "Partitions=gpu,debug Reason=replacing NodeName=gpu03 per ticket 42 [root@2026-01-05]")
UNTYPED = "NodeName=gpu04 Gres=gpu:2(S:0) State=MIXED Partitions=gpu"
# MIG profiles as types (stackhpc/ansible-slurm-appliance PR #656: gpu:nvidia_h100_80gb_hbm3:2,
# gpu:nvidia_h100_80gb_hbm3_4g.40gb:2), several types on one node
MIG = ("NodeName=h100-mig Gres=gpu:nvidia_h100_80gb_hbm3:2(S:0),"
       "gpu:nvidia_h100_80gb_hbm3_4g.40gb:4(S:1) State=IDLE Partitions=mig")
# Slurm 25.11 (SlinkyProject/slurm-operator issue #101): Gres=(null), State=IDLE+DYNAMIC_NORM
NO_GPU = "NodeName=slinky-0 CPUTot=192 Gres=(null) State=IDLE+DYNAMIC_NORM Partitions=all"


def test_real_slurm_line_gives_model_count_partitions_and_keeps_os_text_whole():
    frame, rejects = parse_scontrol_nodes(REAL_2205)
    assert rejects == []
    row = frame.row(0, named=True)
    assert (row["node"], row["gpu_model"], row["gpu_count"], row["partitions"], row["state"]) \
        == ("a100-01", "a100", 8, "gpu", "IDLE")
    assert pairs(REAL_2205)["OS"].endswith("(2024-02-01)")


def test_socket_suffix_other_gres_and_a_reason_naming_another_node():
    frame, rejects = parse_scontrol_nodes(SOCKETS)
    assert rejects == []
    assert frame.select("node", "gpu_model", "gpu_count", "partitions").rows() == [
        ("gpu02", "a100", 4, "gpu,debug")]
    assert pairs(SOCKETS)["Reason"] == "replacing NodeName=gpu03 per ticket 42 [root@2026-01-05]"


def test_untyped_gres_has_an_empty_model():
    frame, _ = parse_scontrol_nodes(UNTYPED)
    assert frame.select("gpu_model", "gpu_count").rows() == [("", 2)]


def test_mig_types_are_rows_of_their_own_and_flagged():
    frame, _ = parse_scontrol_nodes(MIG)
    assert frame.select("gpu_model", "gpu_count", "mig").rows() == [
        ("nvidia_h100_80gb_hbm3", 2, False), ("nvidia_h100_80gb_hbm3_4g.40gb", 4, True)]


def test_node_without_gpus_is_no_inventory_and_no_reject():
    frame, rejects = parse_scontrol_nodes(NO_GPU)
    assert frame.height == 0
    assert rejects == []


def test_unreadable_lines_are_rejects_with_line_and_field():
    text = "\n".join([REAL_2205, "garbage line", "NodeName=bad Gres=gpu:a100:four State=IDLE",
                      REAL_2205, "NodeName=x Gres=gpu:a100:2(S:0 State=IDLE"])
    frame, rejects = parse_scontrol_nodes(text, source_file="snap.txt")
    assert frame["node"].to_list() == ["a100-01"]
    got = [(r.line_no, r.field) for r in rejects]
    assert got == [(2, "NodeName"), (3, "Gres"), (4, "NodeName"), (5, "Gres")]
    assert "expected a GRES count" in rejects[1].reason
    assert "'four'" in rejects[1].reason
    assert "again (first on line 1)" in rejects[2].reason
    assert all(r.source_file == "snap.txt" and r.raw for r in rejects)


@pytest.mark.parametrize(("text", "expected"), [
    ("gpu:a100:4(S:0-1)", [("gpu", "a100", 4)]),
    ("gpu:4", [("gpu", "", 4)]),
    ("gpu", [("gpu", "", 1)]),
    ("gpu:tesla:2(S:0),gpu:k80:2(S:1)", [("gpu", "tesla", 2), ("gpu", "k80", 2)]),
    ("shard:1K", [("shard", "", 1024)]),
    ("(null)", []),
])
def test_gres_entries(text, expected):
    assert [(g.name, g.type, g.count) for g in parse_gres(text)] == expected
