"""One run on a testbed: the network boundary, processes, the run itself, its competing flows, what it measured
and kept, and the database writes of a campaign."""
