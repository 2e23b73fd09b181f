"""Percentile summaries, the one shape every distribution in the report takes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def summary(values: Sequence[float], digits: int = 2) -> dict[str, Any]:
    """n, p50, p95, p99, mean, min and max (linear interpolation between samples)."""
    if len(values) == 0:
        return {"n": 0}
    data = np.asarray(values, dtype=float)
    p50, p95, p99 = np.percentile(data, [50, 95, 99])
    return {
        "n": int(data.size),
        "p50": round(float(p50), digits),
        "p95": round(float(p95), digits),
        "p99": round(float(p99), digits),
        "mean": round(float(data.mean()), digits),
        "min": round(float(data.min()), digits),
        "max": round(float(data.max()), digits),
    }
