"""Is the verdict procedure right? It replays recorded runs (A/A checks, power, the old and the new allocator)
and `fecbench bench verdicts` prints the figures."""
