import random
from datetime import UTC, datetime

import pytest

from simulator.config import DAY, HOUR, SimConfig
from simulator.scheduling import (
    MAX_WAIT,
    NoPlacement,
    View,
    fit_in_window,
    place,
    shared_owner,
    window_end,
)
from simulator.timefmt import compress_hostlist, elapsed
from simulator.world import build_nodes

MONDAY = int(datetime(2026, 1, 5, tzinfo=UTC).timestamp())


def test_shared_nodes_belong_to_kubernetes_on_weekday_daytime():
    assert shared_owner(MONDAY + 7 * HOUR) == "slurm"
    assert shared_owner(MONDAY + 8 * HOUR) == "kubernetes"
    assert shared_owner(MONDAY + 20 * HOUR) == "slurm"
    saturday = MONDAY + 5 * DAY + 12 * HOUR
    assert shared_owner(saturday) == "slurm"
    friday_evening = MONDAY + 4 * DAY + 20 * HOUR
    assert window_end(friday_evening) == MONDAY + 7 * DAY + 8 * HOUR  # the weekend is Slurm's


def test_fit_in_window_keeps_jobs_inside_one_period():
    start = fit_in_window(MONDAY + 6 * HOUR, 3 * HOUR, "slurm")
    assert start == MONDAY + 20 * HOUR  # does not fit before 08:00
    assert fit_in_window(MONDAY + 9 * HOUR, 2 * HOUR, "kubernetes") == MONDAY + 9 * HOUR
    assert fit_in_window(MONDAY, 13 * HOUR, "kubernetes") is None


def test_place_never_overlaps_within_a_view():
    nodes = [n for n in build_nodes(SimConfig()) if n.pool == "slurm" and n.gpu_model == "a100"]
    view = View("slurm", nodes)
    rng = random.Random(1)
    start, placements = place(view, nodes, 8, 2, MONDAY, rng)
    assert start == MONDAY
    assert len({p.node.name for p in placements}) == 2
    for p in placements:
        view.commit(p.node, p.gpu_indices, MONDAY + HOUR)
    later, _ = place(view, nodes, 8, len(nodes), MONDAY, rng)
    assert later == MONDAY + HOUR  # two nodes are busy for an hour


def test_requests_that_cannot_start_in_time_are_given_up():
    nodes = [n for n in build_nodes(SimConfig()) if n.pool == "kubernetes"]
    view = View("kubernetes", nodes)
    for node in nodes:
        view.commit(node, tuple(range(node.gpu_count)), MONDAY + MAX_WAIT + HOUR)
    with pytest.raises(NoPlacement, match="free within 3 days"):
        place(view, nodes, 1, 1, MONDAY, random.Random(1))


def test_reservations_keep_ordinary_jobs_out():
    shared = [n for n in build_nodes(SimConfig()) if n.pool == "shared"][:1]
    view = View("slurm", shared, {shared[0].name: [(MONDAY + 3 * HOUR, MONDAY + 9 * HOUR)]})
    start, _ = place(view, shared, 1, 1, MONDAY + 2 * HOUR, random.Random(1), duration=2 * HOUR,
                     owner="slurm")
    assert start == MONDAY + 20 * HOUR


def test_formats():
    assert compress_hostlist(["gpu-hpc-01", "gpu-hpc-02", "gpu-hpc-04"]) == "gpu-hpc-[01-02,04]"
    assert compress_hostlist(["gpu-hpc-03"]) == "gpu-hpc-03"
    assert elapsed(83) == "00:01:23"
    assert elapsed(DAY + 3661) == "1-01:01:01"
