"""The vocabulary: quantities, specs, a tree's shape, the gang and quorum rules, live workloads, events,
reasons, the rules version."""
