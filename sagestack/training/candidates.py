"""One instance candidate of a job, rendered: its CreateTrainingJob request on that type, and the
quota the request draws on. What the preference path (training/preferences.py), the pipeline's
candidate loop (training/states.py) and capacity (capacity/) read of a candidate."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RenderedCandidate:
    index: int
    instance_type: str
    name: str  # the TrainingJobName this candidate is created with
    request: dict[str, Any]
    processes_per_host: int
    quota_name: str
