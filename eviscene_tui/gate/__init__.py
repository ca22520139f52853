"""The operator gate: one file protocol every driver speaks, beside its search root.

- :mod:`eviscene_tui.gate.protocol`: the protocol itself, standard library only (it also
  runs inside a driver's interpreter): the gate and decision kinds, the sidecar's files,
  the feedback rules, the live channel, the operator's identity;
- :mod:`eviscene_tui.gate.inproc`: the gate inside a driver's process: the heartbeat, the
  waits, the round gate of every feedback search, and (started by path by ``eviscene-tui
  gate``) the import hook that gates the real EviScene driver;
- :mod:`eviscene_tui.gate.bundled`: the bundled driver (``eviscene-tui repair``), a
  feedback search from an existing case whose round, hint and attempt gates it declares;
- :mod:`eviscene_tui.gate.sidecar`: reading a sidecar (pending gates, decisions, what was
  applied, the heartbeat) without writing;
- :mod:`eviscene_tui.gate.decide`: taking a decision (exclusive create, one winner) and
  journaling it in the gate's hash-chained journal;
- :mod:`eviscene_tui.gate.review`: what the record says the driver did (the step it used,
  the journal's chain, the resume state).

The gate tests' stand-in driver and the demo's gated search are scaffolding
(``eviscene_tui/scaffold/``), not part of the gate.

The app side is ``state/gate.py`` (``GateSession``), ``state/live.py`` (the live channel's
tail) and ``ui/widgets/gate_panel.py`` / ``ui/screens/gate.py``; the commands are ``gate``,
``repair``, ``gate-status``, ``decide`` and ``decisions``.
"""

from pathlib import Path

INPROC_PATH = Path(__file__).with_name("inproc.py")
