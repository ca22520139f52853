"""STAND-IN of ``eviscene.orchestrator`` (NOT EviScene): the stage runner and the LLM backend."""
