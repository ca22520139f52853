"""The scaffolding room: what the demo and the tests stand on, installed with the app and
imported by none of its services.

- :mod:`~eviscene_tui.scaffold.loopback`: an ASGI app served on a loopback port in a
  thread (the fake server's and the hint constructor's);
- :mod:`~eviscene_tui.scaffold.tiny`: a tiny byte-level tokenizer that speaks the Qwen
  special-token ids (the fake server's and the samples' token ids);
- :mod:`~eviscene_tui.scaffold.synthetic_capture`: a stand-in case holding only what the
  token views read, for the token tests and the bench;
- :mod:`~eviscene_tui.scaffold.fake_vllm`: the bundled vLLM-compatible fake server and the
  scripted demo hint constructor;
- :mod:`~eviscene_tui.scaffold.samples`: the deterministic generator of ``sample_runs/``;
- :mod:`~eviscene_tui.scaffold.standin`: a small STAND-IN of the real EviScene driver's
  contract (not EviScene), run as its own program by the gate tests;
- :mod:`~eviscene_tui.scaffold.gated_demo`: the demo's gated search (the bundled driver on a
  sample case);
- :mod:`~eviscene_tui.scaffold.commands`: ``eviscene-tui demo`` and ``eviscene-tui
  fake-vllm``, named in ``cli.py``'s table of commands (the one place the product names
  the room).

Each part imports only the parts listed before it and the floors below the room (floors
1–2; the two commands, as every command, anything); no module outside the room imports
it. ``tests/core/test_layers.py`` checks both.
"""
