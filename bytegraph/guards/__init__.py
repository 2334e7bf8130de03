"""Sources, guards, the generated guard functions and the per-code cache."""
