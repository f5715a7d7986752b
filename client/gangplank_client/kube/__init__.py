"""Kubernetes manifests as Gangplank workloads (shared/spec/client.md, *Kubernetes manifests*).

    namespace, body = to_workload(open("job.yaml").read())
    client.submit(namespace, body)

Accepts YAML or JSON text (several documents, or a `List`), a mapping, or a list of mappings, as
kubectl and the official Python client (`ApiClient().sanitize_for_serialization`) write them.
"""
from gangplank_client.kube._convert import KINDS, load, to_workload

__all__ = ["KINDS", "load", "to_workload"]
