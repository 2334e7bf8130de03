"""Reading and writing code objects, and every per-version bytecode fact.

``instructions`` decodes a code object into immutable ``Instruction`` records
with jump targets as indices; ``assemble`` builds new code objects with the
``bytecode`` package; ``compat`` holds the facts that differ between CPython
versions. Nothing here imports torch, so the layer is testable on any
interpreter.
"""
