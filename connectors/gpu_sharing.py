"""What a GPU resource name means: a whole GPU, a MIG instance, a time-sliced or MPS replica, a
Slurm shard (docs/shared-gpus.md). One place for both schedulers' spellings; the site file can
extend them (``SharingNames``).

- Kubernetes, as kube-state-metrics sanitises resource names (``nvidia.com/mig-1g.10gb`` ->
  ``nvidia_com_mig_1g_10gb``): ``nvidia_com_gpu`` is a whole GPU unless the node says otherwise
  (MIG single strategy, time-slicing or MPS replicas: node labels, read elsewhere);
  ``nvidia_com_mig_<N>g_<M>gb[_me]`` is a MIG instance; ``nvidia_com_gpu_shared`` is the device
  plugin's renamed time-slicing resource (``renameByDefault: true``).
- Slurm GRES: ``gres/gpu:1g.10gb`` and ``gres/gpu:a100_3g.20gb`` (a type naming a MIG profile,
  with or without a model prefix), ``gres/shard``, ``gres/mps``. AutoDetect=nvml names types
  from the NVML device name, lower case with spaces as ``_`` (Slurm ``gpu_nvml.c``,
  tests/fixtures/slurm/autodetect/README.md): a whole GPU ``nvidia_h100_80gb_hbm3`` (a model,
  kept as printed for the rate card), a MIG device ``nvidia_h100_80gb_hbm3_3g.40gb`` (the name
  up to its first ``-``, then ``_`` and the profile: ``nvidia_a100_3g.20gb`` on an
  ``NVIDIA A100-SXM4-40GB``) and a compute instance narrower than its GPU instance
  ``nvidia_a100_1c.3g.20gb``.

MIG profiles: ``<compute slices>g.<memory>gb`` with optional ``+me``/``+gfx`` suffixes
(NVIDIA MIG user guide, "Supported MIG Profiles"); an A30 has 4 compute slices, the A100, H100,
H200 and B200 have 7. A compute instance (CI) is ``<c>c.<g>g.<memory>gb``: ``c`` of the ``g``
compute slices of its GPU instance, sharing the instance's memory (MIG user guide,
"Terminology"), so it holds ``c`` compute slices: ``1c.3g.20gb`` is 1/7 of an A100.
"""

import re
from dataclasses import dataclass

MIG = "mig"
TIME_SLICING = "time_slicing"
MPS = "mps"
SHARD = "shard"

WHOLE_GPU_RESOURCE = "nvidia_com_gpu"
#: nvidia.com/mig-1g.10gb, nvidia.com/mig-1g.10gb.me (KSM: every . and - becomes _)
_K8S_MIG = re.compile(r"^nvidia_com_mig_(\d+)g_(\d+)gb(?:_(me|gfx))?$")
#: 1g.10gb, 1g.10gb+me, a100_3g.20gb, h100-1g.10gb (a model prefix before _ or -),
#: AutoDetect=nvml's nvidia_h100_80gb_hbm3_4g.40gb and its compute instances
#: nvidia_a100_1c.3g.20gb (Slurm src/plugins/gpu/nvml/gpu_nvml.c, _handle_mig)
_SLURM_MIG = re.compile(r"^(?:(?P<model>[A-Za-z0-9][A-Za-z0-9_.-]*?)[_-])?"
                        r"(?P<profile>(?:\d+c\.)?\d+g\.\d+gb(?:\+(?:me|gfx))?)$",
                        re.IGNORECASE)
#: a MIG profile in NVIDIA's spelling: 3g.40gb, 1g.10gb+me, a compute instance 1c.3g.20gb
_PROFILE = re.compile(r"^(?:(?P<ci>\d+)c\.)?(?P<gi>\d+)g\.\d+gb(?:\+(?:me|gfx))?$")
#: compute slices per physical GPU; any other model with MIG: 7
_GPU_SLICES = {"a30": 4}
DEFAULT_GPU_SLICES = 7


@dataclass(frozen=True)
class Sharing:
    """A resource's meaning: ``sharing`` None = whole GPUs."""

    sharing: str | None = None
    slice_profile: str | None = None  # MIG: 1g.10gb (NVIDIA's spelling)
    model: str | None = None  # a Slurm type's model prefix (a100 of a100_3g.20gb)

    @property
    def compute_slices(self) -> int | None:
        """The compute slices the MIG profile holds (3 of 3g.20gb, 1 of the compute instance
        1c.3g.20gb); None for the other modes."""
        if self.slice_profile is None:
            return None
        return mig_compute_slices(self.slice_profile)


@dataclass(frozen=True)
class SharingNames:
    """Extra names a site uses (``[gpuledger.sharing]``): Kubernetes resources (KSM spelling)
    that are time-slicing or MPS replicas, e.g. a renamed ``nvidia.com/gpu.shared``."""

    time_slicing_resources: tuple[str, ...] = ("nvidia_com_gpu_shared",)
    mps_resources: tuple[str, ...] = ()


DEFAULT_NAMES = SharingNames()


def k8s_resource(name: str, names: SharingNames = DEFAULT_NAMES) -> Sharing | None:
    """What a KSM ``resource`` label means; None: not a GPU resource."""
    if name == WHOLE_GPU_RESOURCE:
        return Sharing()
    m = _K8S_MIG.match(name)
    if m:
        return Sharing(MIG, f"{m.group(1)}g.{m.group(2)}gb" + (f"+{m.group(3)}" if m.group(3)
                                                               else ""))
    if name in names.time_slicing_resources:
        return Sharing(TIME_SLICING)
    if name in names.mps_resources:
        return Sharing(MPS)
    return None


def k8s_resource_pattern(names: SharingNames = DEFAULT_NAMES) -> str:
    """A PromQL regex (anchored) matching every KSM ``resource`` label ``k8s_resource`` may
    call a GPU resource; the readers still ask ``k8s_resource`` for each one they get."""
    extra = [re.escape(n) for n in (*names.time_slicing_resources, *names.mps_resources)]
    return "|".join(dict.fromkeys([WHOLE_GPU_RESOURCE, "nvidia_com_mig_.+", *extra]))


def mig_profile_from_product(product: str | None) -> str | None:
    """MIG single strategy: GPU Feature Discovery's ``nvidia.com/gpu.product`` ends in
    ``-MIG-1g.10gb`` (``NVIDIA-A100-SXM4-40GB-MIG-1g.5gb``), ``-SHARED`` after it when the
    instances are time-sliced too (GPU Operator docs, gpu-sharing.rst)."""
    if not product:
        return None
    m = re.search(r"-MIG-(\d+g\.\d+gb(?:\+(?:me|gfx))?)(?:-SHARED)?$", product)
    return m.group(1) if m else None


def slurm_gres(key: str) -> Sharing | None:
    """What a GRES TRES key means (``gres/gpu``, ``gres/gpu:1g.10gb``, ``gres/shard``,
    ``gres/mps``); None: not a GPU key (``gres/gpumem``, ``gres/gpuutil``, other GRES)."""
    if key == "gres/gpu":
        return Sharing()
    if key == "gres/shard":
        return Sharing(SHARD)
    if key == "gres/mps":
        return Sharing(MPS)
    if key.startswith("gres/gpu:"):
        return slurm_gpu_type(key.removeprefix("gres/gpu:"))
    return None


def slurm_gpu_type(gres_type: str) -> Sharing:
    """A ``gpu`` GRES type: a MIG profile (``1g.10gb``, ``a100_3g.20gb``,
    ``nvidia_h100_80gb_hbm3_3g.40gb``), a compute instance of one (``nvidia_a100_1c.3g.20gb``:
    profile ``1c.3g.20gb``, model ``nvidia_a100``) or a GPU model (``nvidia_h100_80gb_hbm3``),
    lower case."""
    m = _SLURM_MIG.match(gres_type)
    if m:
        return Sharing(MIG, m["profile"].lower(), (m["model"] or "").lower() or None)
    return Sharing(None, None, gres_type.lower())


def mig_compute_slices(profile: str) -> int:
    """The compute slices a MIG profile holds: ``g`` of ``<g>g.<mem>gb``, ``c`` of a compute
    instance ``<c>c.<g>g.<mem>gb`` (it runs on c of its GPU instance's g slices)."""
    m = _PROFILE.match(profile)
    if m is None:
        msg = f"expected a MIG profile such as 3g.40gb or 1c.3g.20gb, found {profile!r}"
        raise ValueError(msg)
    return int(m["ci"] or m["gi"])


def gpu_slices(gpu_model: str | None) -> int:
    """Compute slices of one physical GPU of that model (7; the A30 has 4)."""
    model = (gpu_model or "").lower()
    return next((n for m, n in _GPU_SLICES.items() if m in model), DEFAULT_GPU_SLICES)
