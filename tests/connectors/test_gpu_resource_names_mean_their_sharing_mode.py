"""connectors/gpu_sharing.py: the resource names both schedulers print, as upstream spells them
(NVIDIA k8s-device-plugin README "Configuration Option Details" and GPU Feature Discovery labels;
Slurm gres.conf "MIG" and "Sharding" sections; kube-state-metrics resource-name sanitising)."""

import pytest

from connectors.gpu_sharing import (
    MIG,
    MPS,
    SHARD,
    TIME_SLICING,
    Sharing,
    SharingNames,
    gpu_slices,
    k8s_resource,
    mig_profile_from_product,
    slurm_gres,
)


@pytest.mark.parametrize(("name", "expected"), [
    ("nvidia_com_gpu", Sharing()),
    ("nvidia_com_mig_1g_10gb", Sharing(MIG, "1g.10gb")),
    ("nvidia_com_mig_3g_40gb", Sharing(MIG, "3g.40gb")),
    ("nvidia_com_mig_1g_10gb_me", Sharing(MIG, "1g.10gb+me")),
    ("nvidia_com_gpu_shared", Sharing(TIME_SLICING)),
    ("cpu", None),
    ("nvidia_com_gpumem", None),
])
def test_kubernetes_resources(name, expected):
    assert k8s_resource(name) == expected


def test_a_site_names_its_own_mps_resource():
    names = SharingNames(mps_resources=("nvidia_com_gpu_mps",))
    assert k8s_resource("nvidia_com_gpu_mps", names) == Sharing(MPS)
    assert k8s_resource("nvidia_com_gpu_mps") is None


@pytest.mark.parametrize(("key", "expected"), [
    ("gres/gpu", Sharing()),
    ("gres/gpu:a100", Sharing(None, None, "a100")),
    ("gres/gpu:1g.10gb", Sharing(MIG, "1g.10gb")),
    ("gres/gpu:a100_3g.20gb", Sharing(MIG, "3g.20gb", "a100")),
    ("gres/gpu:h100-1g.10gb+me", Sharing(MIG, "1g.10gb+me", "h100")),
    ("gres/shard", Sharing(SHARD)),
    ("gres/mps", Sharing(MPS)),
    ("gres/gpumem", None),
    ("gres/gpuutil", None),
])
def test_slurm_gres_keys(key, expected):
    assert slurm_gres(key) == expected


def test_mig_profiles_and_gpu_slices():
    assert Sharing(MIG, "3g.20gb").compute_slices == 3
    assert Sharing().compute_slices is None
    assert mig_profile_from_product("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb") == "1g.5gb"
    assert mig_profile_from_product("NVIDIA-H100-80GB-HBM3") is None
    assert (gpu_slices("h100"), gpu_slices("NVIDIA A30"), gpu_slices(None)) == (7, 4, 7)
