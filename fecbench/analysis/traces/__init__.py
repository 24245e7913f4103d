"""What explains a run: its qlog files read, its timeline, losses by cause, `fecbench explain`."""
