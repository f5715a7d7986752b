"""The node table and the per-node filters (taints, tolerations, node affinity), in kube-scheduler's order."""
