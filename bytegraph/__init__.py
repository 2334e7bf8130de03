"""bytegraph: capture PyTorch programs into torch.fx graphs from their bytecode.

One function through every stage::

    >>> import torch, bytegraph
    >>> def f(x, y):
    ...     z = x + y
    ...     return z * 2
    >>> cf = bytegraph.compile(f, backend="eager")
    >>> cf(torch.ones(2), torch.ones(2))
    tensor([4., 4.])

1. ``bytecode/`` decodes ``f.__code__``: LOAD_FAST x, LOAD_FAST y,
   BINARY_OP +, STORE_FAST z, ..., RETURN_VALUE.
2. ``translate/`` executes those instructions symbolically. ``x`` and ``y``
   are wrapped by ``variables/builder.py`` as TensorVariables, each with a
   guard on its type, dtype, device, shape, stride and requires_grad.
3. ``graph/`` records each tensor operation as an fx node, with shapes
   propagated through meta tensors::

       def forward(self, x, y):
           add = operator.add(x, y)
           mul = operator.mul(add, 2)
           return (mul,)

4. ``graph/backends.py`` hands the GraphModule to the backend.
5. ``codegen.py`` emits a new code object with f's signature: call the
   compiled graph, rebuild the return value.
6. ``guards/`` compiles the guards into one function; the next call with
   tensors of the same metadata runs the transformed code directly.

``api.py`` is the entry (``compile`` and the cache); ``inspect/`` is the layer
over all of this that shows what happened (explain, the dump, the structured
trace, the HTML report, the command line): the core tells it through
``events.py`` and never imports it.
"""

from bytegraph.bytecode.compat import check_supported as _check_supported

_check_supported()

from bytegraph import config, logs  # noqa: E402
from bytegraph.api import compile, reset  # noqa: E402
from bytegraph.exc import BytegraphError, InternalError, Unsupported, UserError  # noqa: E402
from bytegraph.graph.backends import BackendError  # noqa: E402
from bytegraph.graph.shapes import mark_dynamic, mark_static  # noqa: E402
from bytegraph.inspect.explain import explain  # noqa: E402
from bytegraph.logs import set_logs  # noqa: E402
from bytegraph.markers import (  # noqa: E402
    allow_in_graph,
    assume_constant_result,
    disable,
    disallow_in_graph,
    graph_break,
)
from bytegraph.switch import use_for_torch_compile  # noqa: E402

logs.configure_from_environment()

__all__ = [
    "BackendError",
    "BytegraphError",
    "InternalError",
    "Unsupported",
    "UserError",
    "allow_in_graph",
    "assume_constant_result",
    "compile",
    "config",
    "disable",
    "disallow_in_graph",
    "explain",
    "graph_break",
    "mark_dynamic",
    "mark_static",
    "reset",
    "set_logs",
    "use_for_torch_compile",
]
