"""A cancelled run's kept trace checked: its stop keys say so (`check_stop_keys`), and it equals
a fresh run of the units done, the stop keys aside (`assert_same_trace`)."""

from __future__ import annotations

import numpy as np

from lstmviz.io.trace import GradientTrace

STOP_KEYS = ("stopped", "units_done", "units_requested")


def assert_same_trace(kept: GradientTrace, fresh: GradientTrace, skip=()) -> None:
    assert kept.mode == fresh.mode
    assert set(kept.keys()) - set(STOP_KEYS) == set(fresh.keys())
    for key in fresh.arrays:
        if key not in skip:
            np.testing.assert_array_equal(kept[key], fresh[key], err_msg=key)


def check_stop_keys(trace: GradientTrace, done: int, requested: int) -> None:
    assert str(trace["stopped"]) == "cancelled"
    assert trace["units_done"].dtype == np.int64 and int(trace["units_done"]) == done
    assert trace["units_requested"].dtype == np.int64 and int(trace["units_requested"]) == requested
