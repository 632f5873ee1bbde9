"""Issue #27 item 8 end to end: worlds with Slurm nodes inside Kubernetes (``--slinky-nodes``,
both NodeSet scaling modes) and AutoDetect=nvml GPU type names (``--autodetect-gpu-types``, with
MIG and shard nodes: ``--shared-gpus``), through ``gpuledger load-world`` and ``build``, against
the simulator's truth:

* every identity's Slurm GPU-seconds (physical where GPUs are shared) equal the truth, to the
  second (the millisecond where a share is a fraction); Kubernetes within the scrape bound of
  tests/models/test_k8s_truth.py;
* the slurmd pods are charged nothing, the jobs inside are charged on the Kubernetes node, no
  double_scheduled (or over_capacity, unaccounted_use) incident on a Slinky node;
* conservation (models/sql/gpu_conservation_hourly_check.sql) finds nothing over the window, and
  a Slinky node's infrastructure GPU-seconds are its capacity less the jobs' GPU-seconds there;
* slurm-operator's DCGM job mapping: the jobs on Slinky nodes are measured through ``hpc_job``,
  and the node busy seconds are the truth's;
* slurm-bridge pairs (device-plugin path) are still one workload each;
* AutoDetect types: the ledger's model of each Slurm run is the truth's priced model, every
  Slurm line has a rate, and the Slurm invoice lines equal the priced truth to the cent.

Shape sources: tests/simulate/test_slinky_and_autodetect_shapes.py and simulator/slinky.py.
"""

from datetime import timedelta
from decimal import Decimal

import polars as pl
import pytest

from models import load_sql
from simulator import NodeCounts, SimConfig
from tests.models.test_k8s_truth import IDENTITY, KEY, _bounds
from tests.simulate.built_worlds import iso, ledger_frame, truth_allocations, world_builder
from tests.truth_pricing import truth_lines

SMALL = NodeCounts(hpc=3, k8s=1, shared=1)
WORLDS = {
    # two days, the last two hpc nodes inside Kubernetes as slinky-0 and slinky-1
    "statefulset": SimConfig(seed=3, days=2, step_seconds=600, nodes=SMALL, slinky_nodes=2),
    # one day; the last hpc node under its own name, Slurm typing its GPUs (MIG too) as
    # AutoDetect=nvml does, with MIG, time-slicing and shard nodes
    "daemonset_shared": SimConfig(seed=1, days=1, step_seconds=600, nodes=SMALL,
                                  slinky_nodes=1, slinky_mode="daemonset",
                                  autodetect_gpu_types=True, shared_gpus=True),
    # whole GPUs typed by AutoDetect: the invoice lines against the priced truth
    "autodetect": SimConfig(seed=2, days=2, step_seconds=600, nodes=SMALL,
                            autodetect_gpu_types=True),
}
SLINKY = ["statefulset", "daemonset_shared"]
AUTODETECT = ["daemonset_shared", "autodetect"]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory):
    """name -> (world folder, ledger, world.json), each simulated and built once."""
    return world_builder(tmp_path_factory, WORLDS)


def _slinky_nodes(w: dict) -> list[str]:
    return [n["node"] for n in w["slinky"]["nodes"]]


@pytest.mark.parametrize("name", WORLDS)
def test_every_identity_is_charged_its_truth(built, name):
    world, db, w = built(name)
    physical = world / "truth" / "physical_gpu_seconds_daily.csv"
    column = "physical_gpu_seconds" if physical.exists() else "gpu_seconds"
    truth = pl.read_csv(physical if physical.exists() else
                        world / "truth" / "gpu_seconds_daily.csv", try_parse_dates=True,
                        schema_overrides={column: pl.Float64}).rename({column: "truth"})
    ours = ledger_frame(db, "SELECT day, domain, person, team, cost_centre, "
                       "sum(physical_gpu_seconds)::DOUBLE AS ours, count(*) AS pieces "
                       "FROM allocations WHERE day >= $d GROUP BY ALL",
                   {"d": iso(w["window"]["start"]).date()})
    both = truth.join(ours, on=KEY, how="full", coalesce=True).with_columns(
        diff=(pl.col("ours").fill_null(0) - pl.col("truth").fill_null(0)).abs())
    slurm = both.filter(pl.col("domain") == "slurm")
    assert slurm.height > 3
    # each side rounds a fractional share to the millisecond once per piece it keeps
    off = slurm.filter(pl.col("diff") > 0.001 * pl.col("pieces").fill_null(1))
    assert off.is_empty(), off
    pods = truth_allocations(world, w).filter((pl.col("domain") == "kubernetes")
                                               & pl.col("charged"))
    k8s = both.filter(pl.col("domain") == "kubernetes").join(
        _bounds(pods, w), on=["day", *IDENTITY], how="left").with_columns(
        pl.col("bound").fill_null(0) + 0.001 * pl.col("pieces").fill_null(1))
    if physical.exists():  # a whole-GPU pod's end the window cuts: two scrape intervals
        k8s = k8s.with_columns(pl.col("bound") * 2)
    over = k8s.filter(pl.col("diff") > pl.col("bound"))
    assert over.is_empty(), over


@pytest.mark.parametrize("name", SLINKY)
def test_the_slurmd_pods_are_charged_nothing_and_the_jobs_inside_on_their_node(built, name):
    world, db, w = built(name)
    nodes = _slinky_nodes(w)
    truth = truth_allocations(world, w)
    agents = truth.filter(pl.col("outcome") == "slurm_agent")
    assert sorted(agents["node"].to_list()) == sorted(nodes)
    assert not agents["charged"].any()
    assert ledger_frame(db, "SELECT * FROM allocations WHERE k8s_namespace = 'slurm'").is_empty()
    # the ledger saw them: recognised as Slurm's agents, not dropped
    seen = ledger_frame(db, "SELECT node, pod, owner_kind FROM k8s_pod_allocations "
                       "WHERE namespace = 'slurm'")
    assert sorted(seen["node"].to_list()) == sorted(nodes)
    assert set(seen["owner_kind"]) == {"NodeSet"}
    jobs = truth.filter(pl.col("node").is_in(nodes) & (pl.col("domain") == "slurm")
                        & pl.col("charged"))
    ours = ledger_frame(db, "SELECT node, sum(gpu_seconds)::BIGINT AS ours FROM allocations "
                       "WHERE domain = 'slurm' GROUP BY node")
    expected = jobs.group_by("node").agg(
        (pl.col("gpus") * (pl.col("end") - pl.col("start")).dt.total_seconds()).sum()
        .alias("truth"))
    got = expected.join(ours, on="node", how="left")
    assert (got["truth"] > 0).all()
    assert got.filter(pl.col("truth") != pl.col("ours")).is_empty(), got
    evidence = ledger_frame(db, "SELECT evidence FROM allocations WHERE domain = 'slurm' "
                           "AND evidence LIKE '%is slurmd pod%'")
    if w["slinky"]["nodeset"]["scaling_mode"] == "StatefulSet":
        assert evidence.height > 0  # slinky-N placed on its Kubernetes node, and says so
    # the site file's scontrol_nodes: `scontrol show node` Comment= names each pod too
    comments = ledger_frame(db, "SELECT k8s_node, pod_namespace FROM slurm_node_pods")
    assert sorted(comments["k8s_node"].to_list()) == sorted(nodes)
    assert set(comments["pod_namespace"]) == {"slurm"}
    incidents = ledger_frame(db, "SELECT kind, node FROM incidents WHERE kind IN "
                            "('double_scheduled', 'over_capacity', 'unaccounted_use')")
    assert incidents.filter(pl.col("node").is_in(nodes)).is_empty(), incidents


@pytest.mark.parametrize("name", WORLDS)
def test_the_conservation_check_finds_nothing(built, name):
    _, db, w = built(name)
    first = iso(w["window"]["start"]).date()
    end = first + timedelta(days=w["config"]["days"])
    # the tolerance every_gpu_second_accounted_once passes: Kubernetes ends are known to one
    # scrape interval (pipelines/defs/detectors/checks.py)
    tolerance = ledger_frame(db, "SELECT coalesce(max(scrape_interval_s), 0) AS s "
                            "FROM k8s_pod_allocations")["s"][0]
    breaks = ledger_frame(db, f"SELECT * FROM ({load_sql('gpu_conservation_hourly_check')})",
                     {"first_day": first, "end_day": end, "tolerance_s": float(tolerance)})
    assert breaks.is_empty(), breaks
    # the Slinky nodes need no tolerance: nothing is held twice there
    nodes = w["slinky"]["nodes"] if "slinky" in w else []
    strict = ledger_frame(db, f"SELECT * FROM ({load_sql('gpu_conservation_hourly_check')})",
                     {"first_day": first, "end_day": end, "tolerance_s": 0.0})
    assert strict.filter(pl.col("node").is_in([n["node"] for n in nodes])).is_empty()


@pytest.mark.parametrize("name", SLINKY)
def test_slinky_capacity_no_job_holds_is_infrastructure(built, name):
    world, db, w = built(name)
    first = iso(w["window"]["start"]).date()
    end = first + timedelta(days=w["config"]["days"])
    nodes = _slinky_nodes(w)
    truth = truth_allocations(world, w).filter(
        pl.col("node").is_in(nodes) & pl.col("charged")).group_by("node").agg(
        (pl.col("gpus") * (pl.col("end") - pl.col("start")).dt.total_seconds()).sum()
        .alias("jobs"))
    gpus = {n["node"]: n["gpus"] for n in w["slinky"]["nodes"]}
    ours = ledger_frame(db, "SELECT node, sum(capacity_gpu_seconds) AS capacity, "
                       "sum(charged_gpu_seconds) AS charged, "
                       "sum(infrastructure_gpu_seconds) AS infrastructure, "
                       "sum(idle_gpu_seconds + unaccounted_gpu_seconds + conflict_gpu_seconds) "
                       "AS rest FROM gpu_conservation_hourly "
                       "WHERE day >= $first AND day < $end GROUP BY node",
                   {"first": first, "end": end})
    got = truth.join(ours, on="node")
    assert sorted(got["node"].to_list()) == sorted(nodes)
    for row in got.iter_rows(named=True):
        capacity = gpus[row["node"]] * 86_400 * w["config"]["days"]
        assert row["capacity"] == capacity
        assert row["charged"] == Decimal(int(row["jobs"]))
        assert row["infrastructure"] == Decimal(capacity - int(row["jobs"]))
        assert row["rest"] == 0


@pytest.mark.parametrize("name", SLINKY)
def test_jobs_on_slinky_nodes_are_measured_through_the_dcgm_job_mapping(built, name):
    world, db, w = built(name)
    nodes = _slinky_nodes(w)
    usage = ledger_frame(db, "SELECT node, sum(allocated_gpu_seconds) AS allocated, "
                        "sum(measured_gpu_seconds)::DOUBLE AS measured, "
                        "sum(busy_gpu_seconds)::DOUBLE AS busy FROM allocation_usage_hourly "
                        "WHERE domain = 'slurm' GROUP BY node")
    slinky = usage.filter(pl.col("node").is_in(nodes))
    assert slinky.height == len(nodes)
    # a reading every 600 s: a run's coverage falls short by at most a scrape at each end
    assert (slinky["measured"] >= 0.9 * slinky["allocated"]).all(), slinky
    assert (slinky["busy"] > 0).all()
    truth = pl.read_csv(world / "truth" / "gpu_busy_seconds.csv").join(
        ledger_frame(db, "SELECT gpu_uuid, node FROM nodes"), on="gpu_uuid").group_by("node").agg(
        pl.col("busy_seconds").sum())
    node_busy = ledger_frame(db, "SELECT node, sum(busy_gpu_seconds)::DOUBLE AS ours "
                            "FROM node_usage_hourly GROUP BY node").join(truth, on="node")
    slinky_busy = node_busy.filter(pl.col("node").is_in(nodes))
    assert slinky_busy.height == len(nodes)
    assert ((slinky_busy["ours"] - slinky_busy["busy_seconds"]).abs() < 1e-3).all(), slinky_busy


@pytest.mark.parametrize("name", WORLDS)
def test_slurm_bridge_pairs_stay_one_workload(built, name):
    world, db, w = built(name)
    reps = truth_allocations(world, w).filter(pl.col("outcome") == "bridge_representative")
    assert reps.height > 0
    pairs = ledger_frame(db, "SELECT DISTINCT slurm_job, pod, matched FROM bridge_pairs")
    assert pairs["matched"].all()
    assert set(zip(pairs["slurm_job"], pairs["pod"], strict=True)) == set(
        zip(reps["source_key"].cast(pl.String), reps["name"], strict=True))
    charged = ledger_frame(db, "SELECT count(*) AS n FROM allocations WHERE domain = 'slurm' "
                          "AND job_id IN (SELECT slurm_job FROM bridge_pairs)")
    assert charged["n"][0] == 0


@pytest.mark.parametrize("name", AUTODETECT)
def test_autodetect_models_are_the_truths_and_priced(built, name):
    world, db, w = built(name)
    models = set(ledger_frame(db, "SELECT DISTINCT gpu_model FROM allocations "
                             "WHERE domain = 'slurm'")["gpu_model"])
    priced = pl.read_csv(world / "truth" / "gpu_seconds_priced.csv")
    assert models == set(priced.filter(pl.col("domain") == "slurm")["gpu_model"])
    assert {"nvidia_a100-sxm4-80gb", "nvidia_h100_80gb_hbm3"} <= models
    # units x seconds per (day, identity, model, QOS): the ledger reads each type as the truth
    ours = ledger_frame(db, "SELECT strftime(day, '%Y-%m-%d') AS day, person, team, cost_centre, "
                       "gpu_model, qos, sum(gpu_seconds)::BIGINT AS ours FROM allocations "
                       "WHERE domain = 'slurm' AND day >= $d GROUP BY ALL",
                   {"d": iso(w["window"]["start"]).date()})
    key = ["day", "person", "team", "cost_centre", "gpu_model", "qos"]
    truth = priced.filter(pl.col("domain") == "slurm").with_columns(
        pl.col("qos").cast(pl.String).fill_null("")).select(*key, "gpu_seconds")
    got = truth.join(ours.with_columns(pl.col("qos").fill_null("")), on=key, how="full",
                     coalesce=True)
    assert got.filter(pl.col("gpu_seconds") != pl.col("ours")).is_empty(), got
    assert got.filter(pl.col("ours").is_null() | pl.col("gpu_seconds").is_null()).is_empty()
    unpriced = ledger_frame(db, "SELECT * FROM chargeback WHERE rate_per_gpu_hour IS NULL")
    assert unpriced.is_empty(), unpriced
    if "shared_gpus" not in w:  # whole GPUs: the invoice lines are the priced truth, to the cent
        truth_week = truth_lines(world, "week", "slurm")
        lines = ledger_frame(db, "SELECT period, cost_centre, team, person, domain, gpu_model, "
                            "rate_per_gpu_hour, gpu_seconds, amount FROM chargeback_periods "
                            "WHERE period_kind = 'week' AND domain = 'slurm'")
        ours_week = {(*r[:6], Decimal(r[6]).normalize()): (r[7], r[8])
                     for r in lines.iter_rows()}
        assert {(*k[:6], k[6].normalize()): v for k, v in truth_week.items()} == ours_week
