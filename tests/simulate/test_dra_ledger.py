"""Issue #27 item 8 end to end: worlds where half of the Kubernetes GPU workloads hold their GPUs
through DRA ResourceClaims (``--dra-pods 0.5``: template claims, a Deployment's replicas sharing
a claim by name, slurm-bridge pods on the extended-resource path), with dcgm-exporter's DRA labels
and without them (``--no-dcgm-dra-labels``), through ``gpuledger load-world`` (the site file's
``[dra] snapshot`` folder) and ``build``, against the simulator's truth (the device-plugin
world's, tests/simulate/test_dra_shapes.py):

* every identity's Kubernetes GPU-seconds equal the truth within the scrape bound of
  tests/models/test_k8s_truth.py, Slurm's to the second;
* every DRA pod is charged through its claim (rows ``dra/gpu.nvidia.com``), never also as a
  device-plugin request;
* no double_scheduled incident the truth lacks (and the planted one found, except the finding
  below), no over_capacity, no unaccounted_use; a claim several pods share: each pod takes its
  own labelled readings (its allocation names the claim's devices as ``<pool>/<device>`` keys,
  no UUID: models/sql/gpu_usage_span_matches.sql lets the pod labels place it);
* conservation (models/sql/gpu_conservation_hourly_check.sql) finds nothing;
* slurm-bridge pairs on the DRA path (``gres/gpu:gpu.nvidia.com``) are one workload each: the
  pod charged, the job not.

Without dcgm-exporter's DRA labels a DRA pod's GPUs are known by UUID through the driver's
ResourceSlices in the snapshots (``gpu-<minor>`` in pool ``<node>`` is the GPU whose ``uuid``
attribute the slice gives), so the planted double_scheduled incident on a DRA pod is found on
both worlds.
"""

from datetime import timedelta
from pathlib import Path

import polars as pl
import pytest

from gpuledger.ingest.kubernetes.dra import read_fresh
from models import load_sql
from simulator import NodeCounts, SimConfig
from tests.models.test_k8s_truth import IDENTITY, KEY, _bounds
from tests.simulate.built_worlds import iso, ledger_frame, truth_allocations, world_builder

SMALL = NodeCounts(hpc=3, k8s=1, shared=1)
WORLDS = {
    "labels": SimConfig(seed=3, days=2, step_seconds=600, nodes=SMALL, dra_pods=0.5),
    "no_labels": SimConfig(seed=3, days=2, step_seconds=600, nodes=SMALL, dra_pods=0.5,
                           dcgm_dra_labels=False),
}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory):
    """name -> (world folder, ledger, world.json), each simulated and built once."""
    return world_builder(tmp_path_factory, WORLDS)


def _dra_pods(world: Path) -> pl.DataFrame:
    """namespace, pod, via of every pod the ResourceClaim snapshots name."""
    return read_fresh(snapshot=world / "dra").pods.select("namespace", "pod", "via").unique()


def _shared_claim_pods(world: Path) -> set[str]:
    pods = read_fresh(snapshot=world / "dra").pods.filter(pl.col("via") == "reservedFor")
    shared = pods.group_by("claim").agg(pl.col("pod").n_unique().alias("n")).filter(
        pl.col("n") > 1)
    return set(pods.join(shared, on="claim")["pod"])


@pytest.mark.parametrize("name", WORLDS)
def test_every_identity_is_charged_its_truth(built, name):
    world, db, w = built(name)
    truth = pl.read_csv(world / "truth" / "gpu_seconds_daily.csv", try_parse_dates=True,
                        schema_overrides={"gpu_seconds": pl.Float64}).rename(
        {"gpu_seconds": "truth"})
    ours = ledger_frame(db, "SELECT day, domain, person, team, cost_centre, "
                       "sum(physical_gpu_seconds)::DOUBLE AS ours, count(*) AS pieces "
                       "FROM allocations WHERE day >= $d GROUP BY ALL",
                   {"d": iso(w["window"]["start"]).date()})
    both = truth.join(ours, on=KEY, how="full", coalesce=True).with_columns(
        diff=(pl.col("ours").fill_null(0) - pl.col("truth").fill_null(0)).abs())
    slurm = both.filter(pl.col("domain") == "slurm")
    assert slurm.height > 3
    off = slurm.filter(pl.col("diff") > 0.001 * pl.col("pieces").fill_null(1))
    assert off.is_empty(), off
    pods = truth_allocations(world, w).filter((pl.col("domain") == "kubernetes")
                                               & pl.col("charged"))
    k8s = both.filter(pl.col("domain") == "kubernetes").join(
        _bounds(pods, w), on=["day", *IDENTITY], how="left").with_columns(
        pl.col("bound").fill_null(0) + 0.001 * pl.col("pieces").fill_null(1))
    assert k8s.height > 3
    over = k8s.filter(pl.col("diff") > pl.col("bound"))
    assert over.is_empty(), over


@pytest.mark.parametrize("name", WORLDS)
def test_dra_pods_are_charged_through_their_claims(built, name):
    world, db, w = built(name)
    step = w["scrape"]["step_seconds"]
    dra = _dra_pods(world)
    truth = truth_allocations(world, w).filter(
        (pl.col("domain") == "kubernetes") & pl.col("charged")).with_columns(
        pod=pl.col("source_key").str.split("/").list.get(1),
        truth=pl.col("gpus") * (pl.col("end") - pl.col("start")).dt.total_seconds())
    held = truth.join(dra.select("pod").unique(), on="pod", how="semi")
    assert held.height > 10
    ours = ledger_frame(db, "SELECT name AS pod, sum(physical_gpu_seconds)::DOUBLE AS ours "
                       "FROM allocations WHERE domain = 'kubernetes' GROUP BY ALL")
    got = held.group_by("pod").agg(pl.col("truth").sum(), pl.col("gpus").max()).join(
        ours, on="pod", how="left")
    # a pod seen Running at two scrapes at least is charged, within a scrape at each end
    longer = got.filter(pl.col("truth") > 2 * step * pl.col("gpus"))
    assert longer.filter(pl.col("ours").fill_null(0) <= 0).is_empty(), longer
    err = longer.filter((pl.col("ours") - pl.col("truth")).abs() > 2 * step * pl.col("gpus"))
    assert err.is_empty(), err
    rows = ledger_frame(db, "SELECT pod, gpu_resource FROM k8s_pod_allocations")
    kinds = rows.join(dra.select("pod").unique(), on="pod").group_by("pod").agg(
        pl.col("gpu_resource").unique())
    assert kinds.height > 10
    for pod, resources in kinds.iter_rows():
        assert all(r.startswith("dra/gpu.nvidia.com") for r in resources), (pod, resources)
    assert "dra/gpu.nvidia.com/shared" in set(rows["gpu_resource"])


@pytest.mark.parametrize("name", WORLDS)
def test_no_incident_the_truth_does_not_have(built, name):
    world, db, _w = built(name)
    truth = pl.read_csv(world / "truth" / "incidents.csv")
    planted = truth.filter(pl.col("kind") == "double_scheduled")
    found = ledger_frame(db, "SELECT kind, node, detail FROM incidents WHERE kind IN "
                        "('double_scheduled', 'over_capacity', 'unaccounted_use')")
    double = found.filter(pl.col("kind") == "double_scheduled")
    assert set(double["node"]) <= set(planted["node"]), double  # none the truth lacks
    assert found.filter(pl.col("kind") == "over_capacity").is_empty()
    assert found.filter(pl.col("kind") == "unaccounted_use").is_empty()


def test_a_shared_claims_pods_take_their_own_readings(built):
    # dcgm-exporter names each pod on a shared claim's GPU: the readings are theirs (a shared
    # claim's devices are '<pool>/<device>' keys, not UUIDs: the pod labels place them)
    world, db, _ = built("labels")
    shared = _shared_claim_pods(world)
    assert shared
    measured = ledger_frame(db, "SELECT a.name, sum(u.measured_gpu_seconds)::DOUBLE AS measured "
                           "FROM allocation_usage_hourly AS u JOIN allocations AS a "
                           "USING (day, domain, source_key, node, start_ts) "
                           "WHERE a.sharing = 'time_slicing' GROUP BY a.name")
    assert set(measured["name"]) & set(shared)
    assert (measured["measured"] > 0).all(), measured


@pytest.mark.parametrize("name", WORLDS)
def test_the_planted_double_scheduling_is_found(built, name):
    world, db, _ = built(name)
    planted = pl.read_csv(world / "truth" / "incidents.csv").filter(
        pl.col("kind") == "double_scheduled")
    assert planted.height > 0
    found = ledger_frame(db, "SELECT node FROM incidents WHERE kind = 'double_scheduled'")
    assert sorted(found["node"]) == sorted(planted["node"])


@pytest.mark.parametrize("name", WORLDS)
def test_the_conservation_check_finds_nothing(built, name):
    _, db, w = built(name)
    first = iso(w["window"]["start"]).date()
    end = first + timedelta(days=w["config"]["days"])
    tolerance = ledger_frame(db, "SELECT coalesce(max(scrape_interval_s), 0) AS s "
                            "FROM k8s_pod_allocations")["s"][0]
    breaks = ledger_frame(db, f"SELECT * FROM ({load_sql('gpu_conservation_hourly_check')})",
                     {"first_day": first, "end_day": end, "tolerance_s": float(tolerance)})
    assert breaks.is_empty(), breaks


@pytest.mark.parametrize("name", WORLDS)
def test_slurm_bridge_dra_pairs_are_one_workload(built, name):
    world, db, w = built(name)
    reps = truth_allocations(world, w).filter(pl.col("outcome") == "bridge_representative")
    extended = set(_dra_pods(world).filter(pl.col("via") == "extendedResourceClaimStatus")["pod"])
    on_dra = reps.filter(pl.col("name").is_in(list(extended)))
    assert on_dra.height > 0
    assert on_dra.height < reps.height
    pairs = ledger_frame(db, "SELECT DISTINCT slurm_job, pod, matched FROM bridge_pairs")
    assert pairs["matched"].all()
    assert set(zip(pairs["slurm_job"], pairs["pod"], strict=True)) == set(
        zip(reps["source_key"].cast(pl.String), reps["name"], strict=True))
    charged = ledger_frame(db, "SELECT count(*) AS n FROM allocations WHERE domain = 'slurm' "
                          "AND job_id IN (SELECT slurm_job FROM bridge_pairs)")
    assert charged["n"][0] == 0
    pods = ledger_frame(db, "SELECT name, count(DISTINCT source_key) AS keys, "
                       "sum(gpu_seconds) AS s FROM allocations WHERE domain = 'kubernetes' "
                       "GROUP BY name")
    mine = pods.filter(pl.col("name").is_in(on_dra["name"].to_list()))
    assert mine.height == on_dra.height
    assert (mine["keys"] == 1).all()
    assert (mine["s"] > 0).all()
    double = ledger_frame(db, "SELECT detail FROM incidents WHERE kind = 'double_scheduled'")
    for pod in on_dra["name"]:
        assert not double["detail"].str.contains(pod).any(), pod
