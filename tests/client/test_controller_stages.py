"""The reference controller submits a JobSet's stages in order (client.md, *Start order*): the first at
once, each later one when what it waits for is reached, `Complete` from the finished-pod reports and
`Ready` from the placements; deleting the manifest deletes every stage."""
from __future__ import annotations

import textwrap
import time

import pytest

from gangplank_client import Client, ProblemError
from tests.client.test_controller_e2e import Running, composite_supported

PIPELINE = textwrap.dedent("""\
    apiVersion: jobset.x-k8s.io/v1alpha2
    kind: JobSet
    metadata: {name: pipeline, namespace: ml, uid: 7d1c-pipeline}
    spec:
      replicatedJobs:
      - name: prep
        template: {spec: {template: {spec: {containers: [{name: c, image: x, resources: {requests: {cpu: 100m}}}]}}}}
      - name: train
        dependsOn: [{name: prep, status: Complete}]
        template:
          spec:
            parallelism: 2
            template: {spec: {containers: [{name: c, image: x, resources: {requests: {cpu: 100m}}}]}}
      - name: report
        dependsOn: [{name: train, status: Ready}]
        template: {spec: {template: {spec: {containers: [{name: c, image: x, resources: {requests: {cpu: 100m}}}]}}}}
    """)


def _exists(c: Client, name: str) -> bool:
    try:
        c.get_workload("ml", name)
    except ProblemError as exc:
        assert exc.status == 404
        return False
    return True


def test_the_controller_submits_stages_in_order(server, cluster, tmp_path):
    folder = tmp_path / "manifests"
    folder.mkdir()
    with Client(server, cluster=cluster) as c:
        c.put_node("n1", allocatable={"cpu": "4"})
        if not composite_supported(c):
            pytest.skip("the server has no composite pod groups")
        (folder / "pipeline.yaml").write_text(PIPELINE)
        ctl = Running(server, cluster, folder)
        try:
            ctl.wait_for(lambda r: r == "submitted ml/pipeline Scheduled", "the first stage")
            ctl.wait_for(lambda r: r == "staged ml/pipeline-train waits for ml/pipeline (prep Complete)", "staged")
            time.sleep(1.0)  # placed is not complete: nothing more is submitted
            assert not _exists(c, "pipeline-train") and not _exists(c, "pipeline-report")
            prep = c.get_workload("ml", "pipeline")
            c.finish_pods("ml", "pipeline", [{"podGroup": g, "name": p, "phase": "Succeeded"}
                                            for g, p, _ in prep.pods()])
            ctl.wait_for(lambda r: r.startswith("submitted ml/pipeline-train "), "train after prep completed")
            # train's pods are placed at once (Ready): report follows without a finished-pod report
            ctl.wait_for(lambda r: r.startswith("submitted ml/pipeline-report "), "report after train was ready")
            assert c.get_workload("ml", "pipeline-report").status.phase == "Scheduled"
            (folder / "pipeline.yaml").unlink()
            for name in ("pipeline-report", "pipeline-train", "pipeline"):
                ctl.wait_for(lambda r, n=name: r == f"deleted ml/{n} Finished", f"{name} deleted")
        finally:
            ctl.close()


POOLS = textwrap.dedent("""\
    apiVersion: jobset.x-k8s.io/v1alpha2
    kind: JobSet
    metadata: {name: pools, namespace: ml, annotations: {alpha.jobset.sigs.k8s.io/exclusive-topology: example.com/pool}}
    spec:
      replicatedJobs:
      - name: workers
        replicas: 2
        template: {spec: {template: {spec: {containers: [{name: c, image: x}]}}}}
    """)


def test_the_controller_names_a_refusal_at_the_manifest_path(server, cluster, tmp_path):
    folder = tmp_path / "manifests"
    folder.mkdir()
    (folder / "pools.yaml").write_text(POOLS)
    ctl = Running(server, cluster, folder)
    try:
        line = ctl.wait_for(lambda r: r.startswith("refused ml/pools: 422"), "the refusal")
        assert "JobSet pools: metadata.annotations[alpha.jobset.sigs.k8s.io/exclusive-topology]" in line
    finally:
        ctl.close()
