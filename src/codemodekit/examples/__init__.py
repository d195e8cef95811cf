"""Bundled examples: the demo tools and the files ``codemode init`` writes.

``codemodekit.examples.demo`` is a ``type = "python"`` source that needs no network and no
credentials; ``codemode.toml`` and ``hello.ts`` beside it are the starter files.
"""
