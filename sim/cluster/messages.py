"""The one table of upstream versions and of every message the simulated controllers emit.

Upgrading the sim's Kubernetes is this file: the pinned versions below, and each string re-checked at the
new tags. Every string was compared byte for byte with kubernetes/kubernetes v1.32.10 as two vendored
copies of that tag hold it (openshift/microshift a8a16776fa deps/github.com/openshift/kubernetes, and
kubeedge/kubeedge v1.23.0 vendor/k8s.io/kubernetes, github.com/kubeedge/kubernetes v1.32.10-kubeedge1),
and with kubernetes/autoscaler at tag cluster-autoscaler-1.32.5 (whose go.mod requires k8s v1.32.10).
Paths below are relative to those roots; "k8s" is kubernetes/kubernetes, "CA" kubernetes/autoscaler
cluster-autoscaler/.
"""

from __future__ import annotations

from collections.abc import Iterable

# -- pinned versions -------------------------------------------------------------------------------
KUBERNETES_VERSION = "v1.32.10"  # the k8s tag every string below was checked at
CLUSTER_AUTOSCALER_VERSION = "1.32.5"  # CA version/version.go ClusterAutoscalerVersion at that tag
GO_VERSION = "go1.24.9"  # .go-version of the v1.32.10 tree in openshift/microshift a8a16776fa
PROVIDER_SUFFIX = "-gke.1000"  # a GKE build of that release, as GKE's nodes and /version name it
GIT_VERSION = KUBERNETES_VERSION + PROVIDER_SUFFIX
"""What /version, kubeletVersion and the GKE API report: `v1.32.10-gke.1000`."""
MINOR = KUBERNETES_VERSION.lstrip("v").split(".")[1]
GKE_VERSION = GIT_VERSION.lstrip("v")  # GKE's masterVersion / node pool version drop the `v`
EKS_VERSION = "1." + MINOR  # EKS names a cluster's Kubernetes by minor only
EKS_RELEASE_VERSION = KUBERNETES_VERSION.lstrip("v") + "-20250519"  # AMI release: `<k8s>-<build date>`


# -- kube-scheduler (k8s v1.32.10) -----------------------------------------------------------------
SCHEDULER = "default-scheduler"  # staging/src/k8s.io/api/core/v1/types.go DefaultSchedulerName
NO_NODES_AVAILABLE = "no nodes available to schedule pods"  # pkg/scheduler/scheduler.go ErrNoNodesAvailable
# pkg/scheduler/framework/preemption/preemption.go Preempt (absent nodes' status)
PREEMPTION_NOT_HELPFUL = "Preemption is not helpful for scheduling"
# pkg/scheduler/framework/plugins/defaultpreemption/default_preemption.go SelectVictimsOnNode
NO_PREEMPTION_VICTIMS = "No preemption victims found for incoming pod"
# pkg/scheduler/framework/plugins/nodeaffinity/node_affinity.go ErrReasonPod
NODE_AFFINITY_MISMATCH = "node(s) didn't match Pod's node affinity/selector"
# pkg/scheduler/framework/plugins/nodeunschedulable/node_unschedulable.go ErrReasonUnschedulable
NODE_UNSCHEDULABLE = "node(s) were unschedulable"
NODE_NAME_MISMATCH = "node(s) didn't match the requested node name"  # plugins/nodename/node_name.go ErrReason
TOO_MANY_PODS = "Too many pods"  # plugins/noderesources/fit.go fitsRequest


def untolerated_taint(key: str, value: str) -> str:
    """plugins/tainttoleration/taint_toleration.go: `node(s) had untolerated taint {%s: %s}`, with the
    value, not the effect."""
    return f"node(s) had untolerated taint {{{key}: {value}}}"


def insufficient(resource: str) -> str:
    """plugins/noderesources/fit.go fitsRequest: `Insufficient %v`."""
    return f"Insufficient {resource}"


def histogram(reasons: Iterable[str]) -> str:
    """framework/types.go FitError.Error: `%v %v` per reason, sort.Strings'd whole ("10 ..." before "2 ..."),
    joined by ", "."""
    counts: dict[str, int] = {}
    for reason in reasons:
        counts[reason] = counts.get(reason, 0) + 1
    return ", ".join(sorted(f"{n} {r}" for r, n in counts.items()))


def fit_error(total_nodes: int, reasons: Iterable[str], preemption_reasons: Iterable[str]) -> str:
    """framework/types.go FitError.Error: `0/%v nodes are available:` + ` %v.` (filter histogram) + ` %v`
    (PostFilterMsg, with no dot of its own), where default_preemption.go PostFilter's message is
    `preemption: ` + another FitError over the same nodes: so the whole ends in a single `.`."""
    preemption = f"0/{total_nodes} nodes are available: {histogram(preemption_reasons)}."
    return f"0/{total_nodes} nodes are available: {histogram(reasons)}. preemption: {preemption}"


def successfully_assigned(namespace: str, name: str, node: str) -> str:
    # pkg/scheduler/schedule_one.go handleBindingCycle: `Successfully assigned %v/%v to %v`
    return f"Successfully assigned {namespace}/{name} to {node}"


# -- kubelet (k8s v1.32.10): pkg/kubelet/images/image_manager.go EnsureImageExists ----------------
KUBELET = "kubelet"


def pulling(image: str) -> str:
    return f'Pulling image "{image}"'  # `Pulling image %q`


def pulled(image: str, seconds: float, size_bytes: int) -> str:
    """`Successfully pulled image %q in %v (%v including waiting). Image size: %v bytes.`"""
    took = go_duration(seconds)
    return (
        f'Successfully pulled image "{image}" in {took} ({took} including waiting). '
        f"Image size: {size_bytes} bytes."
    )


def already_present(image: str) -> str:
    # `Container image %q already present on machine`
    return f'Container image "{image}" already present on machine'


def pull_failed(image: str, detail: str) -> str:
    return f'Failed to pull image "{image}": {detail}'  # `Failed to pull image %q: %v`


def pull_not_found_detail(image: str) -> str:
    """containerd's answer for a missing repository or tag (its CRI error, which kubelet passes on
    unchanged: evalCRIPullErr's fallback returns err.Error())."""
    ref = image if ":" in image.rsplit("/", 1)[-1] or "@" in image else f"{image}:latest"
    return (
        f'rpc error: code = NotFound desc = failed to pull and unpack image "{ref}": '
        f'failed to resolve reference "{ref}": {ref}: not found'
    )


# kuberuntime/kuberuntime_container.go startContainer: `Error: %v` of the pull error, whose text is
# pkg/kubelet/images/types.go ErrImagePull / ErrImagePullBackOff
ERR_IMAGE_PULL = "Error: ErrImagePull"
IMAGE_PULL_BACKOFF = "Error: ImagePullBackOff"


def back_off_pulling(image: str) -> str:
    return f'Back-off pulling image "{image}"'  # `Back-off pulling image %q`


def back_off_pulling_waiting(image: str, detail: str) -> str:
    """The ImagePullBackOff waiting message: `%s: %s` of the back-off text and the stored
    prevPullErrMsg, itself `%s: %s` of ErrImagePull and the pull error's text."""
    return f"{back_off_pulling(image)}: ErrImagePull: {detail}"


# -- kubelet (k8s v1.32.10): pkg/kubelet/kuberuntime/kuberuntime_container.go ----------------------
def created_container(name: str) -> str:
    return f"Created container: {name}"  # startContainer `Created container: %v`


def started_container(name: str) -> str:
    return f"Started container {name}"  # startContainer `Started container %v`


def stopping_container(name: str) -> str:
    return f"Stopping container {name}"  # killContainer `Stopping container %s`


def pod_desc(pod: str, namespace: str, uid: str) -> str:
    return f"{pod}_{namespace}({uid})"  # pkg/kubelet/util/format/pod.go PodDesc `%s_%s(%s)`


def back_off_restarting(container: str, pod: str, namespace: str, uid: str) -> str:
    """kuberuntime_manager.go doBackOff event: `Back-off restarting failed container %s in pod %s`."""
    return f"Back-off restarting failed container {container} in pod {pod_desc(pod, namespace, uid)}"


def crash_loop_waiting(seconds: float, container: str, pod: str, namespace: str, uid: str) -> str:
    """kuberuntime_manager.go doBackOff, the CrashLoopBackOff waiting message:
    `back-off %s restarting failed container=%s pod=%s`."""
    return (
        f"back-off {go_duration(seconds)} restarting failed container={container} "
        f"pod={pod_desc(pod, namespace, uid)}"
    )


def containers_not_ready(names: Iterable[str]) -> str:
    """pkg/kubelet/status/generate.go: `containers with unready status: %s` of a []string."""
    return f"containers with unready status: [{' '.join(names)}]"


POD_COMPLETED = "PodCompleted"  # pkg/kubelet/status/generate.go PodCompleted
POD_FAILED = "PodFailed"  # pkg/kubelet/status/generate.go PodFailed
CONTAINERS_NOT_READY = "ContainersNotReady"  # pkg/kubelet/status/generate.go ContainersNotReady


# -- pods/log (k8s v1.32.10): pkg/registry/core/pod/strategy.go LogLocation / validateContainer
# (apiserver, 400 BadRequest); the names are every container's, ephemeral ones too (VisitContainers).


def container_name_required(pod: str, containers: Iterable[str] = ()) -> str:
    """`a container name must be specified for pod %s, choose one of: %s` (names as Go prints a slice)."""
    names = list(containers)
    if not names:
        return f"a container name must be specified for pod {pod}"
    return f"a container name must be specified for pod {pod}, choose one of: [{' '.join(names)}]"


def container_not_valid(container: str, pod: str) -> str:
    return f"container {container} is not valid for pod {pod}"  # strategy.go validateContainer


# pkg/kubelet/kubelet_pods.go validateContainerLogStatus (kubelet; the apiserver's GenericHttpResponseChecker,
# staging/src/k8s.io/apiserver/pkg/registry/generic/rest/response_checker.go, turns its 400 into a
# BadRequest Status carrying the text)
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
# PodLogOptions; pkg/registry/core/pod/rest/log.go)
NOT_NEGATIVE = "must be greater than or equal to 0"  # isNegativeErrorMsg
GREATER_THAN_ZERO = "must be greater than 0"
ONE_OF_SINCE = "at most one of `sinceTime` or `sinceSeconds` may be specified"


# -- nodes (k8s v1.32.10) ----------------------------------------------------------------------------
# pkg/kubelet/nodestatus/setters.go ReadyCondition / MemoryPressureCondition / DiskPressureCondition /
# PIDPressureCondition: (type, reason, message) of each condition a healthy kubelet posts
KUBELET_READY_REASON, KUBELET_NOT_READY_REASON = "KubeletReady", "KubeletNotReady"
KUBELET_READY = "kubelet is posting ready status"
NODE_PRESSURE_CONDITIONS = (
    ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
)
# pkg/kubelet/kubelet.go updateRuntimeUp `container runtime network not ready: %v` of the CRI's
# NetworkReady condition, as containerd words it before the CNI plugin is installed
KUBELET_NOT_READY = (
    "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady "
    "message:Network plugin returns error: cni plugin not initialized"
)
STARTING_KUBELET = "Starting kubelet."  # pkg/kubelet/kubelet.go BirthCry
# pkg/kubelet/cm/node_container_manager_linux.go enforceNodeAllocatableCgroups
ALLOCATABLE_ENFORCED = "Updated Node Allocatable limit across pods"


def node_status_now(node: str, status: str) -> str:
    return f"Node {node} status is now: {status}"  # pkg/kubelet/kubelet_node_status.go recordNodeStatusEvent


def registered_node(node: str) -> str:
    """pkg/controller/nodelifecycle/node_lifecycle_controller.go `Registered Node %v in Controller`, through
    pkg/controller/util/node/controller_utils.go RecordNodeEvent `Node %s event: %s`."""
    return f"Node {node} event: Registered Node {node} in Controller"


# -- cluster-autoscaler (CA 1.32.5) -------------------------------------------------------------------
AUTOSCALER = "cluster-autoscaler"
# core/scaleup/orchestrator/skippedreasons.go
MAX_NODE_GROUP_SIZE_REACHED = "max node group size reached"  # MaxLimitReachedReason
IN_BACKOFF = "in backoff after failed scale-up"  # BackoffReason
NOT_READY_FOR_SCALE_UP = "not ready for scale-up"  # NotReadyReason
MAX_TOTAL_NODES = "max total nodes in cluster reached"  # processors/status/eventing_scale_up_processor.go


def scale_up_info(group_id: str, current: int, new: int, max_size: int) -> str:
    """processors/nodegroupset/nodegroup_set_processor.go ScaleUpInfo.String(): `{%v %v->%v (max: %v)}`."""
    return f"{{{group_id} {current}->{new} (max: {max_size})}}"


def triggered_scale_up(infos: Iterable[str]) -> str:
    """processors/status/eventing_scale_up_processor.go: `pod triggered scale-up: %v` of a slice."""
    return f"pod triggered scale-up: [{' '.join(infos)}]"


def not_triggered_scale_up(reasons: Iterable[str]) -> str:
    """eventing_scale_up_processor.go: `pod didn't trigger scale-up: %s` of ReasonsMessage, `%d %s` per
    reason joined by ", " (upstream order is a Go map's; ours is sorted). No reasons leave the space."""
    return f"pod didn't trigger scale-up: {histogram(reasons)}"


SCALE_DOWN_POD = "deleting pod for node scale down"  # core/scaledown/actuation/drain.go
SCALE_DOWN_MARKED = "marked the node as toBeDeleted/unschedulable"  # core/scaledown/actuation/actuator.go
SCALE_DOWN_REMOVED = "nodes removed by cluster autoscaler"  # core/scaledown/actuation/delete_in_batch.go


def scaled_up_group(group: str, new: int, old: int, max_size: int) -> str:
    """core/scaleup/orchestrator/executor.go, before the resize: `Scale-up: setting group %s size to %d
    instead of %d (max: %d)`."""
    return f"Scale-up: setting group {group} size to {new} instead of {old} (max: {max_size})"


def scaled_up_group_done(group: str, new: int, old: int, max_size: int) -> str:
    """executor.go, once the resize call succeeded: `Scale-up: group %s size set to %d instead of %d
    (max: %d)`."""
    return f"Scale-up: group {group} size set to {new} instead of {old} (max: {max_size})"


def scale_up_timed_out(group: str, seconds: float) -> str:
    """clusterstate/clusterstate.go: `Nodes added to group %s failed to register within %v`."""
    return f"Nodes added to group {group} failed to register within {go_duration(seconds)}"


def failed_to_scale_up(group: str, detail: str) -> str:
    return f"Scale-up failed for group {group}: {detail}"  # executor.go `Scale-up failed for group %s: %v`


def scale_down_empty(node: str) -> str:
    return f'Scale-down: removing empty node "{node}"'  # actuator.go `Scale-down: removing empty node %q`


def scale_down_empty_removed(node: str) -> str:
    return f"Scale-down: empty node {node} removed"  # delete_in_batch.go `Scale-down: empty node %s removed`


# GKE's managed autoscaler, seen in the field; upstream CA 1.32.5 has no FailedScaleUp event. The reasons
# are GKE's: "GCE out of resources" and "GCE quota exceeded" (both quoted whole in public troubleshooting
# logs, e.g. GoogleCloudPlatform/PerfKitBenchmarker's tests of FailedScaleUp).
GCE_OUT_OF_RESOURCES = "GCE out of resources"
GCE_QUOTA_EXCEEDED = "GCE quota exceeded"


def gke_failed_scale_up(zone: str, reason: str = GCE_OUT_OF_RESOURCES) -> str:
    return (
        f"Node scale up in zones {zone} associated with this pod failed: {reason}. "
        "Pod is at risk of not being scheduled."
    )


QUOTA_ERROR_CODE = "QUOTA_EXCEEDED"


def quota_message(metric: str, limit: float, region: str) -> str:
    """Compute Engine's quota refusal, `Quota 'NVIDIA_T4_GPUS' exceeded. Limit: 4.0 in region us-central1.`"""
    return f"Quota '{metric}' exceeded. Limit: {limit:.1f} in region {region}."


STOCKOUT_ERROR_CODE = "RESOURCE_POOL_EXHAUSTED"
STOCKOUT_MESSAGE = (
    "Instance creation failed: The zone does not have enough resources available to fulfill the request."
)


# -- apiserver validation (k8s v1.32.10): pkg/apis/core/validation/validation.go ValidateTolerations ----
TOLERATION_EMPTY_KEY = (
    'operator must be Exists when `key` is empty, which means "match all values and all keys"'
)
TOLERATION_SECONDS_EFFECT = "effect must be 'NoExecute' when `tolerationSeconds` is set"
TOLERATION_EXISTS_VALUE = "value must be empty when `operator` is 'Exists'"


def cannot_handle(kind: str, version: str, detail: str) -> str:
    """staging/src/k8s.io/apiserver/pkg/endpoints/handlers/rest.go transformDecodeError:
    `%s in version %q cannot be handled as a %s: %v`."""
    return f'{kind} in version "{version}" cannot be handled as a {kind}: {detail}'


def strict_unknown_fields(paths: list[str]) -> str:
    """staging/src/k8s.io/apimachinery/pkg/runtime/error.go strictDecodingError: `strict decoding error: `
    and the field errors joined by ", " (each `unknown field %q`, from sigs.k8s.io/json)."""
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


def dial_refused(host: str, port: int | str) -> str:
    return f"dial tcp {host}:{port}: connect: connection refused"


def kubelet_refused(host: str, port: int) -> str:
    return f"error dialing backend: {dial_refused(host, port)}"


# -- pods/proxy (sim/cluster/podproxy.py). kubernetes/kubernetes pkg/registry/core/pod/strategy.go
# ResourceLocation (read at 03e0602; the same since v1.20): the id is SplitSchemeNamePort'd
# (staging/src/k8s.io/apimachinery/pkg/util/net/port_split.go), a pod without a global unicast IP is
# refused. A dial error reaches the client through httputil.ReverseProxy's ErrorHandler, the apiserver's
# responder (a 500 Status with no reason) and, unwrapped, as the Go net error.

ADDRESS_NOT_ALLOWED = "address not allowed"


def invalid_pod_request(pod_id: str) -> str:
    return f'invalid pod request "{pod_id}"'
