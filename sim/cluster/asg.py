"""The EC2 Auto Scaling Query API over the EKS nodegroups' groups, so boto3's autoscaling client runs as is.

A platform team tags these groups for the Cluster Autoscaler (auto-discovery, and the node-template
label, taint and resource tags it needs to scale a group up from zero nodes), so the calls about
groups and their tags are served: DescribeAutoScalingGroups, DescribeTags, CreateOrUpdateTags and
DeleteTags. AWS's Query protocol: a form-encoded POST to `/` naming the `Action`, answered in XML.
Each EKS pool has one group, named by `NodePool.group_id()`, sized like the pool; its instances are
not listed (nodes live in the Kubernetes API). Tags live in the pool's `asgTags`, beside the ones EKS
itself put there (`eks.default_asg_tags`).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from datetime import timedelta
from xml.etree import ElementTree

from aiohttp import web

from sim.clock import Clock
from sim.cluster import eks
from sim.cluster.pools import EKS, NodePool, PoolRegistry

logger = logging.getLogger(__name__)

NAMESPACE = "http://autoscaling.amazonaws.com/doc/2011-01-01/"
RESOURCE_TYPE = "auto-scaling-group"
PROPAGATION = "asgTagPropagation"
"""Per tag key, whether EC2 copies it onto instances (PropagateAtLaunch); EKS's own tags do."""

Member = dict[str, str | list[str]]
Form = Mapping[str, str]
"""The request's form fields; Query keys are unique, so a plain mapping holds them."""


class QueryError(Exception):
    def __init__(self, code: str, message: str, *, status: int = 400) -> None:
        super().__init__(message)
        self.code, self.message, self.status = code, message, status


def validation_error(message: str) -> QueryError:
    return QueryError("ValidationError", message)


def members(form: Form, name: str) -> list[Member]:
    """`Name.member.N[.Field[.member.M]]` form keys, as the Query protocol flattens lists, in N order.

    A bare list (`AutoScalingGroupNames.member.1`) comes back as one-field members keyed by "".
    """
    found: dict[int, Member] = {}
    for key, value in form.items():
        parts = key.split(".")
        if len(parts) < 3 or parts[0] != name or parts[1] != "member" or not parts[2].isdigit():
            continue
        member = found.setdefault(int(parts[2]), {})
        field = parts[3] if len(parts) > 3 else ""
        if len(parts) > 5 and parts[4] == "member":  # a list in a member: Filters.member.1.Values.member.2
            values = member.setdefault(field, [])
            if isinstance(values, list):
                values.append(value)
        else:
            member[field] = value
    return [found[index] for index in sorted(found)]


def text(member: Member, field: str) -> str:
    value = member.get(field, "")
    return value if isinstance(value, str) else ""


def values(member: Member) -> list[str]:
    found = member.get("Values", [])
    return found if isinstance(found, list) else [found]


def element(parent: ElementTree.Element, tag: str, value: object) -> ElementTree.Element:
    child = ElementTree.SubElement(parent, tag)
    child.text = str(value).lower() if isinstance(value, bool) else str(value)
    return child


def respond(action: str, result: ElementTree.Element | None = None) -> web.Response:
    root = ElementTree.Element(f"{action}Response", xmlns=NAMESPACE)
    if result is not None:
        root.append(result)
    element(ElementTree.SubElement(root, "ResponseMetadata"), "RequestId", uuid.uuid4())
    return web.Response(body=ElementTree.tostring(root, encoding="utf-8"), content_type="text/xml")


def error_response(error: QueryError) -> web.Response:
    root = ElementTree.Element("ErrorResponse", xmlns=NAMESPACE)
    detail = ElementTree.SubElement(root, "Error")
    element(detail, "Type", "Sender" if error.status < 500 else "Receiver")
    element(detail, "Code", error.code)
    element(detail, "Message", error.message)
    element(root, "RequestId", uuid.uuid4())
    return web.Response(
        body=ElementTree.tostring(root, encoding="utf-8"), status=error.status, content_type="text/xml"
    )


class AutoScalingApi:
    """The Auto Scaling groups behind the EKS pools in the registry, and their tags."""

    def __init__(self, registry: PoolRegistry, *, region: str, clock: Clock) -> None:
        self.registry = registry
        self.region = region
        self.clock = clock

    def routes(self) -> list[web.RouteDef]:
        return [web.post("/", self.dispatch)]

    async def dispatch(self, request: web.Request) -> web.Response:
        form = await request.post()
        action = str(form.get("Action", ""))
        handlers = {
            "DescribeAutoScalingGroups": self.describe_groups,
            "DescribeTags": self.describe_tags,
            "CreateOrUpdateTags": self.create_or_update_tags,
            "DeleteTags": self.delete_tags,
        }
        handler = handlers.get(action)
        try:
            if handler is None:
                raise QueryError("InvalidAction", f"The action {action} is not valid for this web service.")
            return handler({key: value for key, value in form.items() if isinstance(value, str)})
        except QueryError as error:
            return error_response(error)

    # -- groups -------------------------------------------------------------------------------------
    def groups(self) -> dict[str, NodePool]:
        return {pool.group_id(): pool for pool in self.registry.list(EKS)}

    def group(self, name: str) -> NodePool:
        pool = self.groups().get(name)
        if pool is None:
            raise validation_error(f"AutoScalingGroup name not found - {name}")
        return pool

    @staticmethod
    def tags_of(pool: NodePool) -> dict[str, str]:
        tags: dict[str, str] = pool.extra.setdefault("asgTags", {})
        return tags

    def tag_element(self, parent: ElementTree.Element, pool: NodePool, key: str, value: str) -> None:
        member = ElementTree.SubElement(parent, "member")
        element(member, "ResourceId", pool.group_id())
        element(member, "ResourceType", RESOURCE_TYPE)
        element(member, "Key", key)
        element(member, "Value", value)
        element(member, "PropagateAtLaunch", pool.extra.get(PROPAGATION, {}).get(key, True))

    def group_element(self, parent: ElementTree.Element, pool: NodePool) -> None:
        member = ElementTree.SubElement(parent, "member")
        name = pool.group_id()
        element(member, "AutoScalingGroupName", name)
        element(
            member,
            "AutoScalingGroupARN",
            f"arn:aws:autoscaling:{self.region}:{eks.ACCOUNT_ID}:autoScalingGroup:"
            f"{uuid.uuid5(uuid.NAMESPACE_URL, name)}:autoScalingGroupName/{name}",
        )
        element(member, "MinSize", pool.min_size)
        element(member, "MaxSize", pool.max_size)
        element(member, "DesiredCapacity", pool.target_size)
        element(member, "DefaultCooldown", 300)
        element(ElementTree.SubElement(member, "AvailabilityZones"), "member", pool.zone)
        element(member, "HealthCheckType", "EC2")
        element(member, "HealthCheckGracePeriod", 15)
        created = self.clock.epoch + timedelta(seconds=pool.created_at)
        element(member, "CreatedTime", created.strftime("%Y-%m-%dT%H:%M:%S.000Z"))
        ElementTree.SubElement(member, "Instances")
        tags = ElementTree.SubElement(member, "Tags")
        for key, value in sorted(self.tags_of(pool).items()):
            self.tag_element(tags, pool, key, value)
        element(member, "NewInstancesProtectedFromScaleIn", False)
        element(member, "CapacityRebalance", True)

    # -- actions ------------------------------------------------------------------------------------
    def describe_groups(self, form: Form) -> web.Response:
        names = [text(m, "") for m in members(form, "AutoScalingGroupNames")]
        filters = members(form, "Filters")
        result = ElementTree.Element("DescribeAutoScalingGroupsResult")
        found = ElementTree.SubElement(result, "AutoScalingGroups")
        for name, pool in sorted(self.groups().items()):
            if (not names or name in names) and all(self.group_matches(pool, f) for f in filters):
                self.group_element(found, pool)
        return respond("DescribeAutoScalingGroups", result)

    def group_matches(self, pool: NodePool, condition: Member) -> bool:
        name, wanted, tags = text(condition, "Name"), values(condition), self.tags_of(pool)
        if name == "tag-key":
            return any(key in tags for key in wanted)
        if name == "tag-value":
            return any(value in wanted for value in tags.values())
        if name.startswith("tag:"):
            return tags.get(name.removeprefix("tag:")) in wanted
        raise validation_error(f"Filter name {name} is not supported; use tag-key, tag-value or tag:<key>.")

    def describe_tags(self, form: Form) -> web.Response:
        filters = members(form, "Filters")
        result = ElementTree.Element("DescribeTagsResult")
        found = ElementTree.SubElement(result, "Tags")
        for name, pool in sorted(self.groups().items()):
            for key, value in sorted(self.tags_of(pool).items()):
                if all(self.tag_matches(name, key, value, pool, f) for f in filters):
                    self.tag_element(found, pool, key, value)
        return respond("DescribeTags", result)

    @staticmethod
    def tag_matches(group: str, key: str, value: str, pool: NodePool, condition: Member) -> bool:
        propagate = str(pool.extra.get(PROPAGATION, {}).get(key, True)).lower()
        field: Mapping[str, str] = {
            "auto-scaling-group": group,
            "key": key,
            "value": value,
            "propagate-at-launch": propagate,
        }
        name = text(condition, "Name")
        if name not in field:
            raise validation_error(
                f"Filter name {name} is not supported; "
                "use auto-scaling-group, key, value or propagate-at-launch."
            )
        return field[name] in values(condition)

    def tag_changes(self, form: Form) -> list[tuple[NodePool, Member]]:
        """Every tag named, checked before any is applied, so a bad one changes nothing."""
        changes = []
        for tag in members(form, "Tags"):
            kind = text(tag, "ResourceType")
            if kind != RESOURCE_TYPE:
                raise validation_error(f"ResourceType must be {RESOURCE_TYPE}, not {kind}.")
            if not text(tag, "Key"):
                raise validation_error("Tag key must not be empty.")
            changes.append((self.group(text(tag, "ResourceId")), tag))
        if not changes:
            raise validation_error("At least one tag is required.")
        return changes

    def create_or_update_tags(self, form: Form) -> web.Response:
        for pool, tag in self.tag_changes(form):
            key = text(tag, "Key")
            propagate = text(tag, "PropagateAtLaunch").lower() != "false"
            pool.extra.setdefault(PROPAGATION, {})[key] = propagate
            eks.set_asg_tags(self.registry, pool.name, {key: text(tag, "Value")})
            logger.info("ASG %s tagged %s", pool.group_id(), key)
        return respond("CreateOrUpdateTags")

    def delete_tags(self, form: Form) -> web.Response:
        for pool, tag in self.tag_changes(form):
            key = text(tag, "Key")
            pool.extra.get(PROPAGATION, {}).pop(key, None)
            eks.delete_asg_tags(self.registry, pool.name, [key])
        return respond("DeleteTags")


def routes(registry: PoolRegistry, *, region: str, clock: Clock) -> list[web.RouteDef]:
    return AutoScalingApi(registry, region=region, clock=clock).routes()
