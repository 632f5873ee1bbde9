"""``--autodetect-gpu-types``: Slurm GRES types as ``AutoDetect=nvml`` names them.

Slurm names a GPU type from the NVML device name, lower case with spaces as ``_`` (SchedMD/slurm
``src/plugins/gpu/nvml/gpu_nvml.c`` ``gpu_common_underscorify_tolower``): ``NVIDIA H100 80GB
HBM3`` -> ``nvidia_h100_80gb_hbm3``, ``NVIDIA A100-SXM4-80GB`` -> ``nvidia_a100-sxm4-80gb``. A
MIG device's type is the GPU's name cut at its first ``-``, ``_`` and the profile
(``_handle_mig``): ``nvidia_h100_80gb_hbm3_3g.40gb``, ``nvidia_a100_3g.40gb``. Naming rules,
releases and sources: tests/fixtures/slurm/autodetect/README.md.

Without the option the types are what the simulator always wrote: the short model (``a100``,
``h100``) and the bare MIG profile (``1g.10gb``, the suite's real 22.05 captures).
"""

from dataclasses import dataclass

from simulator.world import GPU_MODEL_NAMES as NVML_NAMES  # NVML's names (dcgm's modelName)


def nvml_type(device_name: str) -> str:
    """Slurm's ``gpu_common_underscorify_tolower``: ``NVIDIA H100 80GB HBM3`` ->
    ``nvidia_h100_80gb_hbm3``."""
    return device_name.lower().replace(" ", "_")


def nvml_mig_prefix(device_name: str) -> str:
    """The part of a MIG device's type before the profile: the name cut at its first ``-``."""
    return nvml_type(device_name).split("-", 1)[0]


@dataclass(frozen=True)
class GresNames:
    """The ``gpu`` GRES type names a world's Slurm prints."""

    autodetect: bool = False

    def whole(self, model: str) -> str:
        """A whole GPU's type: ``a100`` or ``nvidia_a100-sxm4-80gb``."""
        return nvml_type(NVML_NAMES[model]) if self.autodetect else model

    def mig(self, model: str, profile: str) -> str:
        """A MIG instance's type: ``1g.10gb`` or ``nvidia_h100_80gb_hbm3_1g.10gb``."""
        return f"{nvml_mig_prefix(NVML_NAMES[model])}_{profile}" if self.autodetect else profile

    def whole_override(self, model: str) -> str:
        """``Shape.gres_type`` / ``Holder.gpu_model``: "" where the type is the model itself."""
        return self.whole(model) if self.autodetect else ""

    def mig_model(self, model: str) -> str:
        """The model the ledger reads from a MIG type's prefix ("" without one: the node's)."""
        return nvml_mig_prefix(NVML_NAMES[model]) if self.autodetect else ""


LEGACY = GresNames()  # the names the simulator always wrote
