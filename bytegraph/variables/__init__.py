"""VariableTracker and its subclasses, one module per Python protocol.

``builder.wrap`` turns real values into VTs (with guards); handlers in
``translate/ops`` call ``call_function``/``call_method``/``var_getattr``.
"""
