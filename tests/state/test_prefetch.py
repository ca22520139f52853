"""The next case read ahead is used only while its files are as they were read."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from eviscene_tui.options import AppOptions
from eviscene_tui.settings import Settings
from eviscene_tui.state.prefetch import prefetch

SAMPLES = Path(__file__).resolve().parents[2] / "sample_runs"
pytestmark = pytest.mark.skipif(not SAMPLES.is_dir(), reason="sample_runs not generated")


def test_a_case_read_ahead_is_dropped_once_its_files_change(tmp_path):
    from eviscene_tui.scaffold.samples import copy_case

    case = copy_case(SAMPLES, "search-no-recoverable-site", tmp_path / "runs")
    options = AppOptions.from_args(tmp_path / "runs", argparse.Namespace(), settings=Settings())
    ready = prefetch(case, "search-no-recoverable-site", options)
    assert ready is not None and ready.view.no_site and ready.still_current()
    assert ready.bundle.trace()[0] is not None  # the trace is read too
    manifest = case / "manifest.json"
    st = manifest.stat()
    os.utime(manifest, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))  # a driver rewrote it
    assert not ready.still_current()
