"""The operator gate inside the real EviScene driver's own feedback search.

- :mod:`eviscene_tui.gate.inproc`: the stdlib-only part that runs inside the
  driver process (started by path by ``eviscene-tui gate``), and the sidecar file
  protocol both sides share;
- :mod:`eviscene_tui.gate.sidecar`: reading a sidecar (status, pending gates,
  decisions, driver heartbeat) without writing;
- :mod:`eviscene_tui.gate.decide`: taking a decision (exclusive create, one
  winner) and journaling it in the gate's hash-chained journal;
- :mod:`eviscene_tui.gate.standin`: a small STAND-IN driver (not EviScene) with
  the same ``run_search`` seam, for the demo and the tests;
  :mod:`eviscene_tui.gate.demo` runs it under the gate for ``eviscene-tui demo``.

The app side is ``state/gate.py`` (``GateSession``) and ``ui/widgets/gate_panel.py``
/ ``ui/screens/gate.py``; the commands are ``gate``, ``gate-status`` and ``decide``.
"""

from pathlib import Path

INPROC_PATH = Path(__file__).with_name("inproc.py")
