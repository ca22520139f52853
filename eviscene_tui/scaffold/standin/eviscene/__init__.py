"""STAND-IN for the ``eviscene`` package's orchestrator (NOT EviScene), for the gate tests.

Only what the stand-in driver's continuations need: ``orchestrator.stage_runner.StageRunner``
(every policy call of a stage through ``_call_llm``, with the real signature) and
``orchestrator.llm_backend`` (one non-streaming chat-completions POST per call, the token
capture of psd-run-format §3.3). Standard library only.
"""
