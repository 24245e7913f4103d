"""The readers and statistics of particular studies: competing flows, multipath paths and messages, where losses
fell, two stacks compared."""
