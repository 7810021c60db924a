"""Compute Engine machine types and the GPUs each family takes, as GKE checks them on a node-pool create.

A small table, not the catalogue: the families GPU pools and their CPU neighbours use. What it does not
list is refused as GKE refuses a typo, so keep it wide enough for real names. Shapes follow
cloud.google.com/compute/docs/general-purpose-machines and .../accelerator-optimized-machines; which GPUs
attach where follows cloud.google.com/compute/docs/gpus/create-vm-with-gpus ("NVIDIA T4, P4, P100, or V100
GPUs": an N1 VM with attached GPUs; "H100, A100, or L4": an accelerator-optimized VM).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

DEFAULT_MACHINE_TYPE = "e2-medium"
"""What GKE gives a pool created without a machine type."""


def _sized(prefix: str, sizes: tuple[int, ...], suffix: str = "") -> set[str]:
    return {f"{prefix}{size}{suffix}" for size in sizes}


MACHINE_TYPES: frozenset[str] = frozenset(
    {"e2-micro", "e2-small", "e2-medium"}
    | _sized("e2-standard-", (2, 4, 8, 16, 32))
    | _sized("e2-highmem-", (2, 4, 8, 16))
    | _sized("e2-highcpu-", (2, 4, 8, 16, 32))
    | _sized("n1-standard-", (1, 2, 4, 8, 16, 32, 64, 96))
    | _sized("n1-highmem-", (2, 4, 8, 16, 32, 64, 96))
    | _sized("n1-highcpu-", (2, 4, 8, 16, 32, 64, 96))
    | _sized("n2-standard-", (2, 4, 8, 16, 32, 48, 64, 80, 96, 128))
    | _sized("n2-highmem-", (2, 4, 8, 16, 32, 48, 64, 80, 96, 128))
    | _sized("n2-highcpu-", (2, 4, 8, 16, 32, 48, 64, 80, 96))
    | _sized("n2d-standard-", (2, 4, 8, 16, 32, 48, 64, 80, 96, 128, 224))
    | _sized("c2-standard-", (4, 8, 16, 30, 60))
    | _sized("g2-standard-", (4, 8, 12, 16, 24, 32, 48, 96))
    | _sized("a2-highgpu-", (1, 2, 4, 8), "g")
    | {"a2-megagpu-16g"}
    | _sized("a2-ultragpu-", (1, 2, 4, 8), "g")
    | _sized("a3-highgpu-", (1, 2, 4, 8), "g")
    | {"a3-megagpu-8g"}
)
CUSTOM_MACHINE = re.compile(r"(?:(?:e2|n1|n2|n2d)-)?custom-\d+-\d+(?:-ext)?")
"""Custom shapes, `n2-custom-4-8192` or N1's bare `custom-4-15360`."""

# The GPUs each family takes: the first prefix a machine type starts with decides.
ACCELERATORS_BY_FAMILY: Mapping[str, frozenset[str]] = {
    "n1-": frozenset({"nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-tesla-p4", "nvidia-tesla-p100"}),
    "custom-": frozenset({"nvidia-tesla-t4", "nvidia-tesla-v100", "nvidia-tesla-p4", "nvidia-tesla-p100"}),
    "g2-": frozenset({"nvidia-l4"}),
    "a2-ultragpu-": frozenset({"nvidia-a100-80gb"}),
    "a2-": frozenset({"nvidia-tesla-a100"}),
    "a3-megagpu-": frozenset({"nvidia-h100-mega-80gb"}),
    "a3-": frozenset({"nvidia-h100-80gb"}),
}
ACCELERATOR_TYPES: frozenset[str] = frozenset().union(*ACCELERATORS_BY_FAMILY.values())


def known_machine(machine_type: str) -> bool:
    return machine_type in MACHINE_TYPES or bool(CUSTOM_MACHINE.fullmatch(machine_type))


def accelerators_for(machine_type: str) -> frozenset[str]:
    family = next((f for f in ACCELERATORS_BY_FAMILY if machine_type.startswith(f)), None)
    return ACCELERATORS_BY_FAMILY[family] if family else frozenset()


def refusal(machine_type: str, accelerator: str, zone: str) -> str | None:
    """GKE's 400 for a node pool of this machine and GPU, in its own words; None when it is accepted."""
    if not machine_type:
        if accelerator:
            # googleapi: Error 400 (hashicorp/terraform-provider-google#8387).
            return (
                f"Cannot use default machine type ({DEFAULT_MACHINE_TYPE}) with GPUs; "
                "choose a different machine type."
            )
        return None
    if not known_machine(machine_type):
        # googleapi: Error 400 from the container API (keras-team/kinetic#305).
        return f'Invalid machine type "{machine_type}" in zone "{zone}": GCE_NOT_FOUND'
    if not accelerator:
        return None
    if accelerator not in ACCELERATOR_TYPES:
        # googleapi: Error 400 on a node-pool create (GoogleCloudPlatform/k8s-config-connector#1902).
        return f'Accelerator type "{accelerator}" does not exist in zone {zone}.'
    if accelerator not in accelerators_for(machine_type):
        # Compute Engine's refusal, which GKE passes on (kubernetes/test-infra#35205: e2-standard-2 with T4).
        return f"[{machine_type}, {accelerator}] features are not compatible for creating instance."
    return None
