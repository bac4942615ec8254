"""What capacity costs: on-demand prices from the instance catalog, the spot estimate, an
endpoint's month."""

from __future__ import annotations

from sagestack.core.catalog.instances import instance_type

SPOT_SAVINGS = 0.70  # an assumption: SageMaker quotes "up to 90%"; spot prices are not published per type
HOURS_PER_MONTH = 730


def price_of(itype: str) -> float | None:
    """On-demand $/h of a type, None where the catalog does not know it."""
    try:
        return instance_type(itype).price_per_hour
    except (KeyError, ValueError):
        return None


def training_cost(itype: str, instance_hours: float) -> tuple[float | None, float | None, float | None]:
    """($/h, on-demand cost, spot estimate) of `instance_hours` on `itype`; None where the catalog
    has no price."""
    price = instance_type(itype).price_per_hour
    if price is None:
        return None, None, None
    on_demand = price * instance_hours
    return price, on_demand, on_demand * (1 - SPOT_SAVINGS)
