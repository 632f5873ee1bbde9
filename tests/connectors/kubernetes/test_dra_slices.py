"""The DRA drivers' ResourceSlices (connectors/kubernetes/dra_slices.py): which GPU (UUID) and
MIG profile each device name a ResourceClaim gives is, read from a kubectl List
(tests/fixtures/kubernetes/dra/resourceslices-*.json, sources in its README); stored with the
claims and read back; and the profile of a MIG device named as before dra-driver-nvidia-gpu
v25.12 (``gpu-1-mig-19-4-1``) taken from its slice."""

import copy
import json
from datetime import datetime

import duckdb
import polars as pl

from connectors.kubernetes.dra_claims import ClaimRead, read_claim_document, read_claim_file
from connectors.kubernetes.dra_pods import _devices
from gpuledger.ingest.kubernetes.dra import store_claims, stored_claims
from models.runner import ensure_schema
from tests.connectors.kubernetes.dra_world import CLAIMS

SLICES = CLAIMS.parent / "resourceslices-20250106T120000Z.json"
AT = datetime(2025, 1, 6, 12)


def test_each_published_device_is_its_gpu():
    read = read_claim_file(SLICES, AT)
    assert read.rejects == []
    assert read.devices.height == 0  # a slices List has no claims
    rows = read.slices.select("pool", "device", "device_type", "gpu_uuid", "mig_uuid",
                              "mig_profile").sort("pool", "device").rows()
    assert rows[:2] == [
        ("kind-dra-1-worker", "gpu-0", "gpu", "GPU-kind-dra-1-worker-0000-0000-0000-000000000000",
         None, None),
        # a MIG device: the GPU is its parent, the profile an attribute
        ("kind-dra-1-worker", "gpu-1-mig-19-4-1", "mig",
         "GPU-kind-dra-1-worker-0001-0000-0000-000000000000",
         "MIG-0b1c2d3e-0001-5a6b-8c9d-0e1f2a3b4c5d", "1g.12gb")]
    assert len(rows) == 2 + 4 + 2
    assert set(read.slices["driver"]) == {"gpu.nvidia.com"}


def test_v1beta1_attributes_under_basic_and_a_bad_attribute_is_a_reject():
    doc = json.loads(SLICES.read_text(encoding="utf-8"))
    beta = copy.deepcopy(doc["items"][1])
    for d in beta["spec"]["devices"]:
        d["basic"] = {"attributes": d.pop("attributes")}
    bad = copy.deepcopy(doc["items"][0])
    bad["spec"]["devices"][2]["attributes"]["uuid"] = "GPU-not-an-attribute-object"
    read = read_claim_document({"items": [beta, bad]}, source="s.json", observed_at=AT,
                               kind="ResourceSlice")
    assert read.slices["gpu_uuid"].to_list() == [
        "GPU-node-b-0000-0000-0000-000000000000", "GPU-node-b-0001-0000-0000-000000000000"]
    [reject] = read.rejects
    assert reject.field == "items[1].spec.devices[2].attributes.uuid"
    assert reject.reason.startswith('expected an attribute object such as {"string": "…"}')


def test_slices_are_stored_with_the_claims_and_read_back():
    read = read_claim_file(CLAIMS, AT) + read_claim_file(SLICES, AT)
    con = duckdb.connect()
    ensure_schema(con)
    store_claims(con, read, "c")
    store_claims(con, read, "c")  # idempotent
    back = stored_claims(con, "c", AT)
    cols = ["pool", "device", "gpu_uuid", "mig_profile"]
    assert back.slices.select(cols).sort(cols).rows() == read.slices.select(cols).sort(cols).rows()


def test_a_mig_device_named_before_v25_12_gets_its_profile_from_the_slice():
    claims = read_claim_file(CLAIMS, AT)
    dcgm = pl.DataFrame(schema={"claim_namespace": pl.String, "claim": pl.String,
                                "driver": pl.String, "pool": pl.String, "device": pl.String,
                                "mig_profile": pl.String})
    without = _devices(claims, dcgm, AT)
    with_slices = _devices(claims + read_claim_file(SLICES, AT), dcgm, AT)
    name = "gpu-1-mig-19-4-1"
    assert without.filter(pl.col("device") == name)["mig_profile"].to_list() == [None]
    assert with_slices.filter(pl.col("device") == name)["mig_profile"].to_list() == ["1g.12gb"]
    assert isinstance(ClaimRead().slices, pl.DataFrame)
