"""The room's two commands, ``demo`` and ``fake-vllm`` (``cli.py`` names them)."""
