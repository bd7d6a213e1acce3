"""Fast writer of ``sadf -d -- -d`` disk rows (sysstat 12.6.1 CSV) from numpy arrays.

sadf prints each row as ``host;interval;timestamp;DEV;`` then the eight metrics with two
decimals (``%.2f``), ``;``-separated, e.g.::

    vm;1;2026-11-22 04:28:49 UTC;vda;1167.00;10044.00;28.00;52.00;8.68;0.66;0.56;2.80

Formatting 100 M rows with ``"%.2f" %`` would take an hour; here every cell is a fixed-width
byte block (digits right-aligned, then ``.dd;``) and a boolean mask drops the leading padding,
so one block of rows becomes text with a handful of array operations.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

HEADER = b"# hostname;interval;timestamp;DEV;tps;rkB/s;wkB/s;dkB/s;areq-sz;aqu-sz;await;%util\n"
INT_DIGITS = 8  # values below 1e8 (sadf prints larger ones too; the generator stays below)


def number_cells(values: npt.NDArray[np.float64]) -> tuple[np.ndarray, np.ndarray]:
    """``%.2f;`` of non-negative ``values`` (shape ``(n, m)``) as bytes ``(n, m, 12)`` + mask."""
    cents = np.rint(values * 100.0).astype(np.int64)
    if (cents < 0).any() or (cents >= 10 ** (INT_DIGITS + 2)).any():
        raise ValueError("values must lie in [0, 1e8)")
    width = INT_DIGITS + 4  # digits, '.', two decimals, ';'
    cells = np.empty((*cents.shape, width), np.uint8)
    rest = cents.copy()
    for j in (width - 2, width - 3):
        cells[..., j] = ord("0") + rest % 10
        rest //= 10
    cells[..., width - 4] = ord(".")
    cells[..., width - 1] = ord(";")
    ndigits = np.ones(cents.shape, np.int64)
    for j in range(INT_DIGITS - 1, -1, -1):
        cells[..., j] = ord("0") + rest % 10
        rest //= 10
    whole = cents // 100
    for power in range(1, INT_DIGITS):
        ndigits += whole >= 10**power
    keep = np.ones(cells.shape, np.bool_)
    keep[..., :INT_DIGITS] = np.arange(INT_DIGITS) >= (INT_DIGITS - ndigits)[..., None]
    return cells, keep


def rows_bytes(prefix: list[bytes], devices: list[bytes], values: npt.NDArray[np.float64]) -> bytes:
    """Rows for ``len(prefix)`` times x ``len(devices)`` devices, time-major (as sadf prints).

    Args:
        prefix: ``b"host;interval;timestamp;"`` per time, all of one length.
        devices: ``b"DEV;"`` per device, all of one length.
        values: shape ``(times, devices, 8)``.
    """
    t, d, m = values.shape
    pre = np.frombuffer(b"".join(prefix), np.uint8).reshape(t, 1, -1)
    dev = np.frombuffer(b"".join(devices), np.uint8).reshape(1, d, -1)
    cells, keep = number_cells(values.reshape(t * d, m))
    cells = cells.reshape(t, d, -1)
    keep = keep.reshape(t, d, -1)
    cells[..., -1] = ord("\n")
    line = np.concatenate(
        [
            np.broadcast_to(pre, (t, d, pre.shape[2])),
            np.broadcast_to(dev, (t, d, dev.shape[2])),
            cells,
        ],
        axis=2,
    )
    mask = np.concatenate([np.ones((t, d, pre.shape[2] + dev.shape[2]), np.bool_), keep], axis=2)
    return line[mask].tobytes()
