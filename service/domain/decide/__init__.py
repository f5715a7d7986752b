"""The decider: accept (commands, a job's life), the pass, trees in the pass."""
