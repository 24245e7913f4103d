"""What an experiment is: a design, the implementations it names, the runs it implies, checked before anything
runs."""
