"""Core: the GPU machine types of GKE and EKS gpubot knows, with the accelerator and GPUs each comes with.

Only a lookup table: an unknown machine type is no error (clouds add new ones often); the GPU count then
comes from the operator or the profile instead.
"""

from __future__ import annotations

from collections.abc import Mapping

GKE, EKS = "gke", "eks"

# (accelerator, GPUs) of machines that come with their GPUs; other GKE machines get accelerators attached.
GKE_GPU_MACHINES: Mapping[str, tuple[str, int]] = {
    **{f"g2-standard-{n}": ("nvidia-l4", 1) for n in (4, 8, 12, 16, 32)},
    "g2-standard-24": ("nvidia-l4", 2),
    "g2-standard-48": ("nvidia-l4", 4),
    "g2-standard-96": ("nvidia-l4", 8),
    **{f"a2-highgpu-{n}g": ("nvidia-tesla-a100", n) for n in (1, 2, 4, 8)},
    **{f"a2-ultragpu-{n}g": ("nvidia-a100-80gb", n) for n in (1, 2, 4, 8)},
    "a3-highgpu-8g": ("nvidia-h100-80gb", 8),
}
GKE_DEFAULT_MACHINES = {
    "nvidia-tesla-t4": "n1-standard-4",
    "nvidia-tesla-v100": "n1-standard-8",
    "nvidia-l4": "g2-standard-4",
    "nvidia-tesla-a100": "a2-highgpu-1g",
    "nvidia-a100-80gb": "a2-ultragpu-1g",
    "nvidia-h100-80gb": "a3-highgpu-8g",
}
EKS_GPU_INSTANCES: Mapping[str, tuple[str, int]] = {
    **{f"g4dn.{s}": ("nvidia-tesla-t4", 1) for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")},
    "g4dn.12xlarge": ("nvidia-tesla-t4", 4),
    "g4dn.metal": ("nvidia-tesla-t4", 8),
    **{f"g5.{s}": ("nvidia-a10g", 1) for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")},
    "g5.12xlarge": ("nvidia-a10g", 4),
    "g5.24xlarge": ("nvidia-a10g", 4),
    "g5.48xlarge": ("nvidia-a10g", 8),
    **{f"g6.{s}": ("nvidia-l4", 1) for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")},
    "g6.12xlarge": ("nvidia-l4", 4),
    "g6.48xlarge": ("nvidia-l4", 8),
    "p3.2xlarge": ("nvidia-tesla-v100", 1),
    "p3.8xlarge": ("nvidia-tesla-v100", 4),
    "p3.16xlarge": ("nvidia-tesla-v100", 8),
    "p4d.24xlarge": ("nvidia-tesla-a100", 8),
    "p5.48xlarge": ("nvidia-h100-80gb", 8),
}
EKS_DEFAULT_INSTANCES = {
    "nvidia-tesla-t4": "g4dn.xlarge",
    "nvidia-a10g": "g5.xlarge",
    "nvidia-l4": "g6.xlarge",
    "nvidia-tesla-v100": "p3.2xlarge",
    "nvidia-tesla-a100": "p4d.24xlarge",
    "nvidia-h100-80gb": "p5.48xlarge",
}
USUAL = {GKE: GKE_DEFAULT_MACHINES, EKS: EKS_DEFAULT_INSTANCES}
BUILT_IN = {GKE: GKE_GPU_MACHINES, EKS: EKS_GPU_INSTANCES}


def built_in_gpus(cloud: str, machine_type: str) -> tuple[str, int] | None:
    """(accelerator, GPUs per node) a machine type comes with, if gpubot knows it does."""
    return BUILT_IN[cloud].get(machine_type)


def usual_machine(cloud: str, accelerator: str) -> str:
    """The machine type a pool for this accelerator usually runs on; empty if gpubot knows none."""
    return USUAL[cloud].get(accelerator, "")
