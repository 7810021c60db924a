"""The seed tutorial, played against the embedded cluster with the real clients, and narrated.

Step 1 creates the GPU pool through the GKE API; step 3 applies the tutorial's pod (first as
published, with its `important:` typo, then corrected); then the pool scales from zero and back.
"""

from __future__ import annotations

import json
import queue
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime
from typing import Any, TextIO

import yaml
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from sim.cluster import world

SEED_MANIFEST = """\
apiVersion: v1
kind: Pod
metadata:
  name: gpu-pod
spec:
  containers:
  - name: cuda-container
    image: nvidia/cuda:12.2.0-base-ubuntu22.04
    command: ["sleep", "3600"]
    resources:
      limits:
        nvidia.com/gpu: 1
  tolerations:
  - important: "nvidia.com/gpu"
    operator: "Equal"
    value: "present"
    effect: "NoSchedule"
  nodeSelector:
    app-type: gpu-workloads
"""
CORRECTED_MANIFEST = SEED_MANIFEST.replace("important:", "key:")


def seed_pod(*, corrected: bool = True) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(CORRECTED_MANIFEST if corrected else SEED_MANIFEST)
    return loaded


class Narrator:
    """Prints what the cluster does, stamped with simulated time since the scenario began."""

    def __init__(self, out: TextIO, start: datetime) -> None:
        self.out, self.start = out, start

    def say(self, text: str, at: datetime | None = None) -> None:
        if at is None:
            self.out.write(f"          {text}\n")
        else:
            seconds = max(int((at - self.start).total_seconds()), 0)
            self.out.write(f"[+{seconds // 60:02d}:{seconds % 60:02d}] {text}\n")
        self.out.flush()


def run_demo(*, speed: float, out: TextIO) -> int:
    config = world.WorldConfig(speed=speed, gpu_pool=False)
    with world.BackgroundWorld(config) as sim:
        started = time.monotonic()
        api = client.ApiClient(client.Configuration(host=sim.url))
        core = client.CoreV1Api(api)
        narrator = Narrator(out, sim.run(sim.world.clock.datetime))
        narrator.say(f"embedded cluster at {sim.url} (simulated time runs {speed:g}x)")
        create_gpu_pool(sim.url, narrator)
        apply_manifests(sim.url, narrator)
        narrator.start = sim.run(sim.world.clock.datetime)  # times count from the pod's creation
        follow(core, narrator, sim)
        narrator.say(f"done in {time.monotonic() - started:.1f}s of wall time")
    return 0


def create_gpu_pool(url: str, narrator: Narrator) -> None:
    from google.api_core.client_options import ClientOptions
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import container_v1

    gke = container_v1.ClusterManagerClient(
        transport="rest",
        credentials=AnonymousCredentials(),  # type: ignore[no-untyped-call]
        client_options=ClientOptions(api_endpoint=url),
    )
    parent = f"projects/{world.PROJECT}/locations/{world.LOCATION}/clusters/{world.CLUSTER}"
    pool = container_v1.NodePool(
        name="gpu-pool",
        config=container_v1.NodeConfig(
            machine_type="n1-standard-4",
            accelerators=[
                container_v1.AcceleratorConfig(accelerator_count=1, accelerator_type="nvidia-tesla-t4")
            ],
            labels={"app-type": "gpu-workloads"},
            taints=[
                container_v1.NodeTaint(
                    key="nvidia.com/gpu", value="present", effect=container_v1.NodeTaint.Effect.NO_SCHEDULE
                )
            ],
        ),
        autoscaling=container_v1.NodePoolAutoscaling(enabled=True, min_node_count=0, max_node_count=5),
        initial_node_count=0,
    )
    narrator.say("step 1: gcloud container node-pools create gpu-pool (T4, autoscaling 0..5, tainted)")
    operation = gke.create_node_pool(parent=parent, node_pool=pool)
    name = f"projects/{world.PROJECT}/locations/{world.LOCATION}/operations/{operation.name}"
    while operation.status != container_v1.Operation.Status.DONE:  # as gcloud waits, polling
        time.sleep(0.2)
        operation = gke.get_operation(name=name)
    took = (datetime.fromisoformat(operation.end_time) - datetime.fromisoformat(operation.start_time)).seconds
    narrator.say(f"        operation {operation.operation_type.name} DONE after {took}s of simulated time")
    got = gke.get_node_pool(name=f"{parent}/nodePools/gpu-pool")
    narrator.say(
        f"        pool {got.name}: {got.config.machine_type}, autoscaling "
        f"{got.autoscaling.min_node_count}..{got.autoscaling.max_node_count}, 0 nodes"
    )


def apply_manifests(url: str, narrator: Narrator) -> None:
    """Posted as kubectl posts them: the official client's own models would refuse the typo locally."""
    narrator.say("step 3: kubectl create -f gpu-pod.yaml (the tutorial's manifest, as published)")
    for strict in (True, False):
        status, body = post_pod(url, seed_pod(corrected=False), strict=strict)
        how = "kubectl (strict field validation)" if strict else "kubectl --validate=false"
        narrator.say(f"        {how} -> {status}: {body.get('message')}")
    narrator.say(
        "        the toleration says `important:` where it means `key:`; creating the corrected manifest"
    )
    status, body = post_pod(url, seed_pod(corrected=True), strict=True)
    if status != 201:
        raise RuntimeError(f"the corrected manifest was refused: {body.get('message')}")


def post_pod(url: str, pod: dict[str, Any], *, strict: bool) -> tuple[int, dict[str, Any]]:
    query = "?fieldManager=kubectl-create" + ("&fieldValidation=Strict" if strict else "")
    request = urllib.request.Request(
        f"{url}/api/v1/namespaces/default/pods{query}",
        data=json.dumps(pod).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "Accept": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(json.loads(response.read()))
    except urllib.error.HTTPError as err:
        return err.code, dict(json.loads(err.read() or b"{}"))


def follow(core: client.CoreV1Api, narrator: Narrator, sim: world.BackgroundWorld) -> None:
    """Narrate events and node changes until the pod ran, was deleted, and the pool is back at zero."""
    feed: queue.Queue[tuple[str, Any]] = queue.Queue()
    stop = threading.Event()
    for kind in ("events", "nodes"):
        threading.Thread(target=_pump, args=(core, kind, feed, stop), daemon=True).start()
    phase = "waiting"
    gpu_nodes: set[str] = set()
    while phase != "done":
        kind, item = feed.get(timeout=120)
        if kind == "events":
            event = item
            stamp = event.last_timestamp or event.event_time
            obj = event.involved_object
            narrator.say(
                f"{event.type:<7} {obj.kind.lower()}/{obj.name:<40} {event.reason}: {event.message}", stamp
            )
            if event.reason == "Started" and obj.name == "gpu-pod" and phase == "waiting":
                phase = "running"
                narrator.say(
                    "the pod is Running on a fresh GPU node; the user is done, so: kubectl delete pod gpu-pod"
                )
                core.delete_namespaced_pod("gpu-pod", "default")
        else:
            change, node = item
            name = node.metadata.name
            if (node.metadata.labels or {}).get("cloud.google.com/gke-nodepool") != "gpu-pool":
                continue
            if change == "DELETED":
                gpu_nodes.discard(name)
                narrator.say(
                    f"node/{name} removed; gpu-pool has {len(gpu_nodes)} node(s)",
                    sim.run(sim.world.clock.datetime),
                )
                if not gpu_nodes and phase == "running":
                    narrator.say("gpu-pool is back at 0 nodes", sim.run(sim.world.clock.datetime))
                    phase = "done"
            else:
                gpu_nodes.add(name)
    stop.set()


def _pump(
    core: client.CoreV1Api, kind: str, feed: queue.Queue[tuple[str, Any]], stop: threading.Event
) -> None:
    lister = core.list_event_for_all_namespaces if kind == "events" else core.list_node
    version = ""
    while not stop.is_set():
        try:
            stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
                lister, timeout_seconds=300, resource_version=version
            )
            for change in stream:
                version = change["object"].metadata.resource_version
                if kind == "events" and change["type"] in ("ADDED", "MODIFIED"):
                    feed.put((kind, change["object"]))
                elif kind == "nodes":
                    feed.put((kind, (change["type"], change["object"])))
                if stop.is_set():
                    return
        except ApiException as err:  # 410: start over from a fresh list, as an informer would
            version = "" if err.status == 410 else version
        except Exception:  # a dropped connection: resume from the last version seen
            time.sleep(0.2)
