"""OutputGraph, its SubgraphTracer, metadata propagation and the backends."""
