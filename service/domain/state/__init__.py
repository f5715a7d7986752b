"""The cluster aggregate's state and the queue's skip index."""
