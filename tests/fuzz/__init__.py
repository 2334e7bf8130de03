"""A deterministic differential fuzzer for bytegraph.

``grammar`` generates programs as small trees rendered to Python source,
``runner`` runs each one eagerly and compiled (in worker processes, with a
hard timeout) and compares everything observable, ``shrink`` minimises a
failing program, ``pool`` owns the worker processes. ``bench/fuzz.py`` is the
command line; ``test_fuzz.py`` is the bounded CI run.
"""
