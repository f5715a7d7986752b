"""Prometheus metrics shared by the HTTP app, the application service and Kafka."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)

REQUESTS = Counter("gangplank_http_requests_total", "HTTP requests", ["method", "route", "status"],
                   registry=REGISTRY)
DECISIONS = Counter("gangplank_decisions_total", "Decision events by type", ["type"], registry=REGISTRY)
DECISION_LATENCY = Histogram(
    "gangplank_decision_seconds", "Time to decide one input (the scheduling pass)",
    buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5), registry=REGISTRY)
QUEUE_LENGTH = Gauge("gangplank_queue_length", "Pending pod groups", ["cluster"], registry=REGISTRY)
EVENTS_APPENDED = Counter("gangplank_events_appended_total", "Events appended to the store", registry=REGISTRY)
KAFKA_LAG = Gauge("gangplank_kafka_lag", "Kafka consumer lag (messages)", ["topic", "partition"],
                  registry=REGISTRY)

# replicas (docs/replicas.md)
FORWARDED = Counter("gangplank_forwarded_total", "What this replica passed to a cluster's owner (http: a request,"
                    " kafka: a run)", ["kind"], registry=REGISTRY)
OWNED_CLUSTERS = Gauge("gangplank_owned_clusters", "Clusters this replica owns", registry=REGISTRY)
OWNERSHIP_CHANGES = Counter("gangplank_ownership_changes_total", "Changes of owner, counted by the new owner"
                            " (new, failover, handover)", ["reason"], registry=REGISTRY)
FENCED_APPENDS = Counter("gangplank_fenced_appends_total", "Appends refused because this replica no longer"
                         " owned the cluster", registry=REGISTRY)
