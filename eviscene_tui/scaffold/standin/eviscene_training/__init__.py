"""STAND-IN for EviScene's ``eviscene_training`` package (NOT EviScene).

Bundled with eviscene-tui so the gate tests can run a driver of the real driver's
shape without EviScene: ``psd_repair_search.run_search`` with its ``execute_round``
seam, and ``psd_repair_runtime.QwenContinuationAdapter.propose_hints``. Standard
library only. The feedback rules are not copied here: they are the gate protocol's
(``eviscene_tui/gate/protocol.py``, loaded by path as ``eviscene_gate_protocol``).
"""

import importlib.util
import os
import sys

if "eviscene_gate_protocol" not in sys.modules:  # the gate loads it first when the stand-in runs under it
    _path = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, os.pardir, "gate", "protocol.py")
    _spec = importlib.util.spec_from_file_location("eviscene_gate_protocol", os.path.abspath(_path))
    _module = importlib.util.module_from_spec(_spec)
    sys.modules["eviscene_gate_protocol"] = _module
    _spec.loader.exec_module(_module)
