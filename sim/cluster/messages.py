"""Every upstream message the simulated controllers emit, each with the source it copies.

Kept in one place so a change upstream is one edit, and so tests can compare against the same strings
a real cluster prints in `kubectl describe`.
"""

from __future__ import annotations

from collections.abc import Iterable

# -- kube-scheduler: pkg/scheduler/framework/types.go, plugins/* ------------------------------------
SCHEDULER = "default-scheduler"
NO_NODES_AVAILABLE = "no nodes available to schedule pods"  # framework.ErrNoNodesAvailable
PREEMPTION_NOT_HELPFUL = "Preemption is not helpful for scheduling"  # defaultpreemption
NO_PREEMPTION_VICTIMS = "No preemption victims found for incoming pod"  # defaultpreemption
NODE_AFFINITY_MISMATCH = "node(s) didn't match Pod's node affinity/selector"  # nodeaffinity.ErrReasonPod
NODE_UNSCHEDULABLE = "node(s) were unschedulable"  # nodeunschedulable.ErrReasonUnschedulable
NODE_NAME_MISMATCH = "node(s) didn't match the requested node name"  # nodename.ErrReason
TOO_MANY_PODS = "Too many pods"  # noderesources/fit.go fitsRequest


def untolerated_taint(key: str, value: str) -> str:
    """tainttoleration: `node(s) had untolerated taint {%s: %s}`, with the value, not the effect."""
    return f"node(s) had untolerated taint {{{key}: {value}}}"


def insufficient(resource: str) -> str:
    """noderesources/fit.go: `Insufficient %v`."""
    return f"Insufficient {resource}"


def histogram(reasons: Iterable[str]) -> str:
    """`%v %v` per reason, sorted as whole strings (so "10 ..." sorts before "2 ..."), joined by ", "."""
    counts: dict[str, int] = {}
    for reason in reasons:
        counts[reason] = counts.get(reason, 0) + 1
    return ", ".join(sorted(f"{n} {r}" for r, n in counts.items()))


def fit_error(total_nodes: int, reasons: Iterable[str], preemption_reasons: Iterable[str]) -> str:
    """FitError.Error(): `0/N nodes are available: <hist>. preemption: 0/N nodes are available: <hist>..`."""
    preemption = f"0/{total_nodes} nodes are available: {histogram(preemption_reasons)}."
    return f"0/{total_nodes} nodes are available: {histogram(reasons)}. preemption: {preemption}."


def successfully_assigned(namespace: str, name: str, node: str) -> str:
    return f"Successfully assigned {namespace}/{name} to {node}"  # schedule_one.go


# -- kubelet: pkg/kubelet/images/image_manager.go, kuberuntime/kuberuntime_container.go ---------
KUBELET = "kubelet"


def pulling(image: str) -> str:
    return f'Pulling image "{image}"'


def pulled(image: str, seconds: float, size_bytes: int) -> str:
    took = go_duration(seconds)
    return (
        f'Successfully pulled image "{image}" in {took} ({took} including waiting). '
        f"Image size: {size_bytes} bytes."
    )


def already_present(image: str) -> str:
    return f'Container image "{image}" already present on machine'


def pull_failed(image: str, detail: str) -> str:
    return f'Failed to pull image "{image}": {detail}'


def pull_not_found_detail(image: str) -> str:
    """containerd's answer for a missing repository or tag, as kubelet wraps it."""
    ref = image if ":" in image.rsplit("/", 1)[-1] or "@" in image else f"{image}:latest"
    return (
        f'rpc error: code = NotFound desc = failed to pull and unpack image "{ref}": '
        f'failed to resolve reference "{ref}": {ref}: not found'
    )


ERR_IMAGE_PULL = "Error: ErrImagePull"
IMAGE_PULL_BACKOFF = "Error: ImagePullBackOff"


def back_off_pulling(image: str) -> str:
    return f'Back-off pulling image "{image}"'


def created_container(name: str) -> str:
    return f"Created container: {name}"


def started_container(name: str) -> str:
    return f"Started container {name}"


def stopping_container(name: str) -> str:
    return f"Stopping container {name}"


def back_off_restarting(container: str, pod: str, namespace: str, uid: str) -> str:
    return f"Back-off restarting failed container {container} in pod {pod}_{namespace}({uid})"


def containers_not_ready(names: Iterable[str]) -> str:
    return f"containers with unready status: [{' '.join(names)}]"


# -- pods/log, kubernetes/kubernetes. The v1.32.4 tag itself could not be read here; each source names
# the commits read. pkg/registry/core/pod/strategy.go LogLocation / validateContainer (apiserver, 400
# BadRequest), master 008b365; the older form prints the same for a pod without init containers.


def container_name_required(pod: str, containers: Iterable[str] = ()) -> str:
    """`a container name must be specified for pod %s, choose one of: %s` (names as Go prints a slice)."""
    names = list(containers)
    if not names:
        return f"a container name must be specified for pod {pod}"
    return f"a container name must be specified for pod {pod}, choose one of: [{' '.join(names)}]"


def container_not_valid(container: str, pod: str) -> str:
    return f"container {container} is not valid for pod {pod}"  # strategy.go validateContainer


# pkg/kubelet/kubelet_pods.go validateContainerLogStatus, same wording at df5f024 (a v1.31/v1.32-era tree)
# and master 001a80e (kubelet; the apiserver's GenericHttpResponseChecker, staging/src/k8s.io/apiserver
# pkg/registry/generic/rest/response_checker.go, turns its 400 into a BadRequest Status carrying the text)
def container_not_available(container: str, pod: str) -> str:
    return f'container "{container}" in pod "{pod}" is not available'


def previous_not_found(container: str, pod: str) -> str:
    return f'previous terminated container "{container}" in pod "{pod}" not found'


def container_terminated(container: str, pod: str) -> str:
    return f'container "{container}" in pod "{pod}" is terminated'


def waiting_to_start(container: str, pod: str, reason: str) -> str:
    """The waiting reason, except the two image-pull ones, which kubelet words for people."""
    detail = {
        "ErrImagePull": "image can't be pulled",
        "ImagePullBackOff": "trying and failing to pull image",
    }.get(reason, reason)
    return f'container "{container}" in pod "{pod}" is waiting to start: {detail}'


def waiting_no_logs(container: str, pod: str) -> str:
    return f'container "{container}" in pod "{pod}" is waiting to start - no logs yet'


# pkg/apis/core/validation/validation.go ValidatePodLogOptions (apiserver, 422 Invalid on kind
# PodLogOptions; pkg/registry/core/pod/rest/log.go), same rules and wording in every version read
NOT_NEGATIVE = "must be greater than or equal to 0"  # isNegativeErrorMsg
GREATER_THAN_ZERO = "must be greater than 0"
ONE_OF_SINCE = "at most one of `sinceTime` or `sinceSeconds` may be specified"


# -- node lifecycle: kubelet_node_status.go, node lifecycle controller ---------------------------
KUBELET_READY = "kubelet is posting ready status"
KUBELET_NOT_READY = (
    "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady "
    "message:Network plugin returns error: cni plugin not initialized"
)
STARTING_KUBELET = "Starting kubelet."
ALLOCATABLE_ENFORCED = "Updated Node Allocatable limit across pods"


def node_status_now(node: str, status: str) -> str:
    return f"Node {node} status is now: {status}"


def registered_node(node: str) -> str:
    return f"Node {node} event: Registered Node {node} in Controller"  # node-controller RegisteredNode


# -- cluster-autoscaler: processors/status/eventing_scale_up_processor.go and friends ------------
AUTOSCALER = "cluster-autoscaler"
MAX_NODE_GROUP_SIZE_REACHED = "max node group size reached"  # skippedreasons.go
IN_BACKOFF = "in backoff after failed scale-up"  # skippedreasons.go
NOT_READY_FOR_SCALE_UP = "not ready for scale-up"  # skippedreasons.go
MAX_TOTAL_NODES = "max total nodes in cluster reached"


def scale_up_info(group_id: str, current: int, new: int, max_size: int) -> str:
    """ScaleUpInfo.String(): `{%v %v->%v (max: %v)}`."""
    return f"{{{group_id} {current}->{new} (max: {max_size})}}"


def triggered_scale_up(infos: Iterable[str]) -> str:
    return f"pod triggered scale-up: [{' '.join(infos)}]"


def not_triggered_scale_up(reasons: Iterable[str]) -> str:
    """ReasonsMessage: `%d %s` per reason, joined by ", " (upstream order is a Go map's; ours is sorted)."""
    return f"pod didn't trigger scale-up: {histogram(reasons)}"


SCALE_DOWN_POD = "deleting pod for node scale down"  # scaledown/actuation/drain.go
SCALE_DOWN_MARKED = "marked the node as toBeDeleted/unschedulable"  # actuator.go
SCALE_DOWN_REMOVED = "nodes removed by cluster autoscaler"  # delete_in_batch.go


def scaled_up_group(group: str, new: int, old: int, max_size: int) -> str:
    return f"Scale-up: setting group {group} size to {new} instead of {old} (max: {max_size})"


def scale_up_timed_out(group: str, seconds: float) -> str:
    return f"Nodes added to group {group} failed to register within {go_duration(seconds)}"


def failed_to_scale_up(group: str, detail: str) -> str:
    return f"Scale-up failed for group {group}: {detail}"


def scale_down_empty(node: str) -> str:
    return f'Scale-down: removing empty node "{node}"'


def scale_down_empty_removed(node: str) -> str:
    return f"Scale-down: empty node {node} removed"


# GKE's managed autoscaler, seen in the field; the upstream autoscaler has no FailedScaleUp.
def gke_failed_scale_up(zone: str) -> str:
    return (
        f"Node scale up in zones {zone} associated with this pod failed: GCE out of resources. "
        "Pod is at risk of not being scheduled."
    )


STOCKOUT_ERROR_CODE = "RESOURCE_POOL_EXHAUSTED"
STOCKOUT_MESSAGE = (
    "Instance creation failed: The zone does not have enough resources available to fulfill the request."
)


# -- apiserver validation: pkg/apis/core/validation/validation.go ---------------------------------
TOLERATION_EMPTY_KEY = (
    'operator must be Exists when `key` is empty, which means "match all values and all keys"'
)
TOLERATION_SECONDS_EFFECT = "effect must be 'NoExecute' when `tolerationSeconds` is set"
TOLERATION_EXISTS_VALUE = "value must be empty when `operator` is 'Exists'"


def cannot_handle(kind: str, version: str, detail: str) -> str:
    """Strict decoding failures, as the apiserver words them for a create."""
    return f'{kind} in version "{version}" cannot be handled as a {kind}: {detail}'


def strict_unknown_fields(paths: list[str]) -> str:
    if len(paths) == 1:
        return f'strict decoding error: unknown field "{paths[0]}"'
    return "strict decoding error: " + ", ".join(f'unknown field "{p}"' for p in paths)


def go_duration(seconds: float) -> str:
    """time.Duration.String() for the durations we print: `1m30s`, `45.2s`, `15m0s`."""
    if seconds < 60:
        text = f"{seconds:.3f}".rstrip("0").rstrip(".")
        return f"{text}s"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    sec_text = f"{secs:.3f}".rstrip("0").rstrip(".") or "0"
    if hours:
        return f"{int(hours)}h{int(minutes)}m{sec_text}s"
    return f"{int(minutes)}m{sec_text}s"


# -- pods/exec, pods/attach, pods/portforward (sim/cluster/streaming.py). kubernetes/kubernetes
# pkg/registry/core/pod/strategy.go streamLocation / PortForwardLocation (400 BadRequest) and
# staging/src/k8s.io/apimachinery/pkg/util/proxy/upgradeaware.go (UpgradeRequired's 400; dial()'s wrap
# of the dial error, which the apiserver's responder answers as a 500 Status with no reason), read at
# master 008b365; the Go net error is `dial tcp HOST:PORT: connect: connection refused`.

UPGRADE_REQUIRED = "Upgrade request required"


def no_host_assigned(pod: str) -> str:
    return f"pod {pod} does not have a host assigned"


def kubelet_refused(host: str, port: int) -> str:
    return f"error dialing backend: dial tcp {host}:{port}: connect: connection refused"
