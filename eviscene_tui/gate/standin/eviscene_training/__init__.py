"""STAND-IN for EviScene's ``eviscene_training`` package (NOT EviScene).

Bundled with eviscene-tui so the operator gate can be demonstrated and tested
without EviScene: ``psd_repair_search.run_search`` and its feedback rules, and
``psd_repair_runtime.QwenContinuationAdapter.propose_hints``, follow the
contract of ``psd-run-format.md`` §4. Standard library only.
"""
