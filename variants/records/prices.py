"""Published hourly prices of the machines a record can be priced on: the Hugging Face Spaces hardware table.

Data only, kept in one place with its source and date so that the Benchmark tab, ``python -m variants bench``
and the report quote the same numbers (:mod:`variants.records.cost` applies them). Prices change: the date
says when they were read; a visitor can always type the price they pay instead.
"""

from __future__ import annotations

from dataclasses import dataclass

SOURCE_URL = "https://huggingface.co/docs/hub/spaces-gpus"
SOURCE_NAME = "Hugging Face Spaces hardware table"
# The page as last changed on 2026-07-21 (hub-docs commit 34ee0f00), read on 2026-11-29.
PUBLISHED = "2026-07-21"
READ_ON = "2026-11-29"


@dataclass(frozen=True)
class HourlyPrice:
    """One machine of the table: its dollars per hour and what it is, and the hardware a record must have run
    on for the price to apply to it (``kind``: "cpu" or "cuda"; ``gpu``: a word of the GPU's name)."""

    key: str  # for the command line: --price cpu-upgrade
    name: str  # as the table names it
    usd_per_hour: float
    kind: str
    machine: str  # cores, memory and GPU, as the table gives them
    gpu: str | None = None

    @property
    def free(self) -> bool:
        return self.usd_per_hour == 0

    def label(self) -> str:
        """E.g. "CPU Upgrade (8 vCPU, 32 GB): $0.03/hour"; "CPU Basic (2 vCPU, 16 GB): free"."""
        price = "free" if self.free else f"${self.usd_per_hour:.2f}/hour"
        return f"{self.name} ({self.machine}): {price}"


SPACES_PRICES = (
    HourlyPrice("cpu-basic", "CPU Basic", 0.0, "cpu", "2 vCPU, 16 GB"),
    HourlyPrice("cpu-upgrade", "CPU Upgrade", 0.03, "cpu", "8 vCPU, 32 GB"),
    HourlyPrice("t4-small", "Nvidia T4 - small", 0.40, "cuda", "4 vCPU, 15 GB, T4 16 GB", gpu="T4"),
    HourlyPrice("t4-medium", "Nvidia T4 - medium", 0.60, "cuda", "8 vCPU, 30 GB, T4 16 GB", gpu="T4"),
    HourlyPrice("l4", "1x Nvidia L4", 0.80, "cuda", "8 vCPU, 30 GB, L4 24 GB", gpu="L4"),
    HourlyPrice("a10g-small", "Nvidia A10G - small", 1.00, "cuda", "4 vCPU, 15 GB, A10G 24 GB", gpu="A10G"),
    HourlyPrice("a100-large", "Nvidia A100 - large", 2.50, "cuda", "12 vCPU, 142 GB, A100 80 GB", gpu="A100"),
)
