"""Assertions every hand-written catalog's tests share about a probe's subject and control."""

from __future__ import annotations

import numpy as np


def assert_control_runs_on_subject_arrays(probe) -> None:
    """The control's feeds are a subset of the subject's and are the same arrays: same dtype,
    same shape, same values (NaN matching NaN), so the control differs from the subject only
    in what the feature changes (docs/catalog.md, "subject and control").

    Raises:
        AssertionError: a control feed the subject lacks, or one that differs from it.
    """
    assert set(probe.control.feeds) <= set(probe.subject.feeds)
    for name, arr in probe.control.feeds.items():
        np.testing.assert_array_equal(arr, probe.subject.feeds[name], strict=True, err_msg=name)
