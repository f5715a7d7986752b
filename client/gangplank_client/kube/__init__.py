"""Kubernetes manifests as Gangplank workloads (shared/spec/client.md, *Kubernetes manifests* and
*Manifests as users keep them*).

    result = convert(open("jobset.yaml").read())
    for namespace, body in result.workloads:
        client.submit(namespace, body)

Accepts YAML or JSON text (several documents, or a `List`), a mapping, or a list of mappings, as
kubectl and the official Python client (`ApiClient().sanitize_for_serialization`) write them.
Nothing raises anything but `ManifestError` (a ValueError) naming the object and the path.
"""
from gangplank_client.kube._conversion import SERVED, Conversion, Stage, Wait, convert, to_workload
from gangplank_client.kube._objects import to_objects
from gangplank_client.kube._read import ManifestError, generated_name, load, read_sources

KINDS = SERVED

__all__ = ["KINDS", "SERVED", "Conversion", "ManifestError", "Stage", "Wait", "convert", "generated_name", "load",
           "read_sources", "to_objects", "to_workload"]
