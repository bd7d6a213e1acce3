"""Every drop type has a shipper (pipeline/shippers/formats)."""

from __future__ import annotations

from typing import get_args

from pipeline.settings import DropType
from pipeline.shippers.formats import SHIPPERS


def test_every_drop_type_has_a_shipper() -> None:
    assert set(SHIPPERS) == set(get_args(DropType))
