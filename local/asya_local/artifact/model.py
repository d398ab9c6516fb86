"""What the templates of a cloud assembly say the mesh is: queues, tables, buckets, functions, event sources,
schedules, API methods and each function's role policies, resolved to concrete names and ARNs.

:func:`read_mesh` walks every stack (nested ones included) and sorts each resource into one of three kinds:

- **emulated**: its effect is reproduced locally (:data:`EMULATED_TYPES`);
- **inert**: accepted by name because it has no runtime effect on a local run (:data:`INERT_TYPES`: alarms,
  dashboards, log groups, API Gateway deployment/stage/account, Lambda permissions, ...);
- anything else is a :class:`~asya_local.artifact.template.TemplateError` naming the type and the logical id: a
  resource the mesh cannot honour is never skipped.

A function's policies are its role's inline ``Policies``, every ``AWS::IAM::Policy``/``AWS::IAM::ManagedPolicy``
attached to the role, and the AWS managed policies of :data:`MANAGED_POLICIES` (their documented statements); an AWS
managed policy not in that table is an error.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from asya_local.artifact.edgelimits import EdgeLimits, read_edge_limits
from asya_local.artifact.template import Assembly, Resource, Stack, TemplateError

__all__ = [
    "EMULATED_TYPES",
    "INERT_TYPES",
    "MANAGED_POLICIES",
    "ApiMethod",
    "EventSource",
    "FunctionSpec",
    "MeshSpec",
    "QueueSpec",
    "Schedule",
    "read_mesh",
]

EMULATED_TYPES: Final = frozenset(
    {
        "AWS::SQS::Queue",
        "AWS::DynamoDB::Table",
        "AWS::S3::Bucket",
        "AWS::Lambda::Function",
        "AWS::Lambda::LayerVersion",
        "AWS::Lambda::EventSourceMapping",
        "AWS::Events::Rule",
        "AWS::ApiGateway::RestApi",
        "AWS::ApiGateway::Resource",
        "AWS::ApiGateway::Method",
        "AWS::ApiGateway::Authorizer",
        "AWS::IAM::Role",
        "AWS::IAM::Policy",
        "AWS::IAM::ManagedPolicy",
        "AWS::CloudFormation::Stack",
        "AWS::SecretsManager::Secret",
        # API Gateway's answers under load: asya_local.artifact.edgelimits
        "AWS::ApiGateway::GatewayResponse",
    }
)
#: Accepted by name: no effect on a local run. Resource policies of queues and the bucket only deny plain-HTTP
#: access (``aws:SecureTransport``), which a local endpoint cannot offer; API Gateway's deployment, stage and account
#: only publish the methods read from the template (the stage's throttle is read apart, ``edgelimits``); the VPC,
#: its endpoints and security groups only route what runs over loopback here (a function's ``VpcConfig`` is not
#: read); the others are observability, backup or deployment plumbing.
INERT_TYPES: Final = frozenset(
    {
        "AWS::CloudWatch::Alarm",
        "AWS::CloudWatch::CompositeAlarm",
        "AWS::CloudWatch::Dashboard",
        "AWS::Logs::LogGroup",
        "AWS::Logs::MetricFilter",
        "AWS::ApiGateway::Account",
        "AWS::ApiGateway::Deployment",
        "AWS::ApiGateway::Stage",
        # a custom domain and a WAF web ACL are in front of the API in AWS; the local front is 127.0.0.1 itself
        "AWS::ApiGateway::DomainName",
        "AWS::ApiGateway::BasePathMapping",
        "AWS::WAFv2::WebACLAssociation",
        "AWS::Lambda::Permission",
        "AWS::Lambda::EventInvokeConfig",
        "AWS::SNS::Topic",
        "AWS::SNS::TopicPolicy",
        "AWS::SQS::QueuePolicy",
        "AWS::S3::BucketPolicy",
        "AWS::CDK::Metadata",
        # the VPC a function runs in: locally every function reaches moto over loopback, the VPC-free path
        "AWS::EC2::VPC",
        "AWS::EC2::Subnet",
        "AWS::EC2::RouteTable",
        "AWS::EC2::SubnetRouteTableAssociation",
        "AWS::EC2::SecurityGroup",
        "AWS::EC2::SecurityGroupIngress",
        "AWS::EC2::SecurityGroupEgress",
        "AWS::EC2::VPCEndpoint",
        # the table's backup plan runs on AWS Backup's schedule, never during a local run
        "AWS::Backup::BackupVault",
        "AWS::Backup::BackupPlan",
        "AWS::Backup::BackupSelection",
    }
)
#: AWS managed policies the templates may attach, by name, with their documented statements.
MANAGED_POLICIES: Final[Mapping[str, list[dict[str, Any]]]] = {
    "service-role/AWSLambdaBasicExecutionRole": [
        {
            "Effect": "Allow",
            "Action": ["logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents"],
            "Resource": "*",
        }
    ],
    "service-role/AWSLambdaSQSQueueExecutionRole": [
        {
            "Effect": "Allow",
            "Action": [
                "sqs:ReceiveMessage",
                "sqs:DeleteMessage",
                "sqs:GetQueueAttributes",
                "logs:CreateLogGroup",
                "logs:CreateLogStream",
                "logs:PutLogEvents",
            ],
            "Resource": "*",
        }
    ],
    "service-role/AmazonAPIGatewayPushToCloudWatchLogs": [
        {
            "Effect": "Allow",
            "Action": [
                "logs:CreateLogGroup",
                "logs:CreateLogStream",
                "logs:DescribeLogGroups",
                "logs:DescribeLogStreams",
                "logs:PutLogEvents",
                "logs:GetLogEvents",
                "logs:FilterLogEvents",
            ],
            "Resource": "*",
        }
    ],
    # the network interfaces of a function in a VPC: Lambda's own calls, never a function's
    "service-role/AWSLambdaVPCAccessExecutionRole": [
        {
            "Effect": "Allow",
            "Action": [
                "logs:CreateLogGroup",
                "logs:CreateLogStream",
                "logs:PutLogEvents",
                "ec2:CreateNetworkInterface",
                "ec2:DescribeNetworkInterfaces",
                "ec2:DescribeSubnets",
                "ec2:DeleteNetworkInterface",
                "ec2:AssignPrivateIpAddresses",
                "ec2:UnassignPrivateIpAddresses",
            ],
            "Resource": "*",
        }
    ],
    # AWS Backup's selection role (no function's): the DynamoDB part of the documented policies
    "service-role/AWSBackupServiceRolePolicyForBackup": [
        {
            "Effect": "Allow",
            "Action": ["dynamodb:DescribeTable", "dynamodb:CreateBackup", "dynamodb:ListTagsOfResource"],
            "Resource": "arn:aws:dynamodb:*:*:table/*",
        }
    ],
    "service-role/AWSBackupServiceRolePolicyForRestores": [
        {
            "Effect": "Allow",
            "Action": ["dynamodb:RestoreTableFromBackup", "dynamodb:DescribeBackup", "dynamodb:Scan"],
            "Resource": "arn:aws:dynamodb:*:*:table/*",
        }
    ],
    "AWSXRayDaemonWriteAccess": [
        {
            "Effect": "Allow",
            "Action": [
                "xray:PutTraceSegments",
                "xray:PutTelemetryRecords",
                "xray:GetSamplingRules",
                "xray:GetSamplingTargets",
                "xray:GetSamplingStatisticSummaries",
            ],
            "Resource": "*",
        }
    ],
}
_MANAGED_PREFIX: Final = "arn:aws:iam::aws:policy/"


@dataclass(frozen=True, slots=True)
class QueueSpec:
    logical_id: str
    name: str
    arn: str
    attributes: dict[str, str]


@dataclass(frozen=True, slots=True)
class TableSpec:
    logical_id: str
    name: str
    arn: str
    create_kwargs: dict[str, Any]
    ttl_attribute: str | None


@dataclass(frozen=True, slots=True)
class BucketSpec:
    logical_id: str
    name: str
    properties: dict[str, Any]


@dataclass(frozen=True, slots=True)
class FunctionSpec:
    """One Lambda function as synthesized: its code and layer directories in the assembly, handler, environment
    (resolved), timeout, memory and role policies."""

    logical_id: str
    name: str
    arn: str
    handler: str
    runtime: str
    code_dir: Path
    layer_dirs: tuple[Path, ...]
    external_layers: tuple[str, ...]
    environment: dict[str, str]
    timeout: int
    memory: int
    role_arn: str
    policies: tuple[dict[str, Any], ...] = field(default=())


@dataclass(frozen=True, slots=True)
class EventSource:
    logical_id: str
    function: str
    queue_arn: str
    batch_size: int
    batching_window: float
    report_batch_item_failures: bool
    max_concurrency: int | None
    enabled: bool


@dataclass(frozen=True, slots=True)
class Schedule:
    logical_id: str
    expression: str
    functions: tuple[str, ...]
    enabled: bool


@dataclass(frozen=True, slots=True)
class ApiMethod:
    """One method of the REST API: its path (``/`` joined path parts, ``{proxy+}`` kept), HTTP method (``ANY``
    included), authorization type, authorizer (resolved properties) and the function its proxy integration calls."""

    path: str
    http_method: str
    authorization: str
    authorizer: dict[str, Any] | None
    function: str | None


@dataclass
class MeshSpec:
    queues: dict[str, QueueSpec] = field(default_factory=dict)  # by ARN
    tables: list[TableSpec] = field(default_factory=list)
    buckets: list[BucketSpec] = field(default_factory=list)
    functions: dict[str, FunctionSpec] = field(default_factory=dict)  # by ARN
    event_sources: list[EventSource] = field(default_factory=list)
    schedules: list[Schedule] = field(default_factory=list)
    methods: list[ApiMethod] = field(default_factory=list)
    inert: dict[str, int] = field(default_factory=dict)
    #: secrets the templates create (the reporter keys, GW-EDGE-2): their names, created with a random value
    secrets: list[str] = field(default_factory=list)
    #: the stage throttle and the gateway responses the API front plays (GW-OVL-6)
    edge_limits: EdgeLimits = field(default_factory=EdgeLimits)

    def function_named(self, name: str) -> FunctionSpec:
        for function in self.functions.values():
            if function.name == name:
                return function
        raise TemplateError(f"no function named {name!r} in the assembly")


def read_mesh(assembly: Assembly) -> MeshSpec:
    """Every resource of every stack of ``assembly``, sorted and resolved (see the module docstring)."""
    spec = MeshSpec()
    stacks = assembly.all_stacks()
    for stack in stacks:
        for resource in stack.resources.values():
            if resource.type in INERT_TYPES:
                spec.inert[resource.type] = spec.inert.get(resource.type, 0) + 1
            elif resource.type not in EMULATED_TYPES:
                raise TemplateError(
                    f"{resource.where}: the artifact mesh cannot honour resource type {resource.type} "
                    f"(logical id {resource.logical_id}); it is neither emulated nor known to be inert"
                )
    for stack in stacks:
        policies = _role_policies(stack)
        for resource in stack.resources.values():
            match resource.type:
                case "AWS::SQS::Queue":
                    queue = _queue(resource)
                    spec.queues[queue.arn] = queue
                case "AWS::DynamoDB::Table":
                    spec.tables.append(_table(resource))
                case "AWS::S3::Bucket":
                    spec.buckets.append(
                        BucketSpec(
                            resource.logical_id,
                            stack.physical_name(resource.logical_id),
                            dict(stack.resolve(dict(resource.properties), where=resource.logical_id)),
                        )
                    )
                case "AWS::SecretsManager::Secret":
                    spec.secrets.append(stack.physical_name(resource.logical_id))
                case "AWS::Lambda::Function":
                    function = _function(resource, policies)
                    spec.functions[function.arn] = function
                case "AWS::Lambda::EventSourceMapping":
                    spec.event_sources.append(_event_source(resource))
                case "AWS::Events::Rule":
                    spec.schedules.append(_schedule(resource))
        spec.methods.extend(_methods(stack))
    spec.edge_limits = read_edge_limits(stacks)
    for source in spec.event_sources:
        if source.queue_arn not in spec.queues:
            raise TemplateError(f"event source {source.logical_id}: {source.queue_arn} is no queue of the assembly")
    return spec


def _queue(resource: Resource) -> QueueSpec:
    stack = resource.stack
    name = stack.physical_name(resource.logical_id)
    attributes: dict[str, str] = {}
    for prop in (
        "VisibilityTimeout",
        "MessageRetentionPeriod",
        "DelaySeconds",
        "MaximumMessageSize",
        "ReceiveMessageWaitTimeSeconds",
        "SqsManagedSseEnabled",
        "FifoQueue",
        "ContentBasedDeduplication",
    ):
        value = resource.prop(prop)
        if value is not None:
            attributes[prop] = str(value).lower() if isinstance(value, bool) else str(value)
    redrive = resource.prop("RedrivePolicy")
    if redrive is not None:
        attributes["RedrivePolicy"] = __import__("json").dumps(
            {"deadLetterTargetArn": redrive["deadLetterTargetArn"], "maxReceiveCount": str(redrive["maxReceiveCount"])}
        )
    arn = str(stack.get_att(resource.logical_id, "Arn"))
    return QueueSpec(resource.logical_id, name, arn, attributes)


def _table(resource: Resource) -> TableSpec:
    stack = resource.stack
    name = stack.physical_name(resource.logical_id)
    kwargs: dict[str, Any] = {
        "TableName": name,
        "AttributeDefinitions": resource.prop("AttributeDefinitions"),
        "KeySchema": resource.prop("KeySchema"),
        "BillingMode": resource.prop("BillingMode", "PROVISIONED"),
    }
    for prop in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes", "ProvisionedThroughput", "StreamSpecification"):
        value = resource.prop(prop)
        if value:
            kwargs[prop] = value
    ttl = resource.prop("TimeToLiveSpecification")
    ttl_attribute = ttl["AttributeName"] if ttl and ttl.get("Enabled") else None
    return TableSpec(resource.logical_id, name, str(stack.get_att(resource.logical_id, "Arn")), kwargs, ttl_attribute)


def _function(resource: Resource, policies: Mapping[str, list[dict[str, Any]]]) -> FunctionSpec:
    stack = resource.stack
    where = resource.where
    code = resource.prop("Code") or {}
    if "S3Key" not in code:
        raise TemplateError(f"{where}: only S3 file assets are supported as Code (got {sorted(code)})")
    code_dir = stack.assembly.asset_dir(str(code["S3Key"]), where=where)
    layer_dirs: list[Path] = []
    external: list[str] = []
    for raw, layer_arn in zip(resource.properties.get("Layers") or [], resource.prop("Layers") or [], strict=True):
        if isinstance(raw, dict) and "Ref" in raw:
            layer = stack.resource(raw["Ref"])
            content = layer.prop("Content") or {}
            layer_dirs.append(stack.assembly.asset_dir(str(content["S3Key"]), where=layer.where))
        else:
            external.append(str(layer_arn))
    role_arn = str(resource.prop("Role", ""))
    role_logical = _role_logical_id(resource)
    variables = (resource.prop("Environment") or {}).get("Variables") or {}
    return FunctionSpec(
        logical_id=resource.logical_id,
        name=stack.physical_name(resource.logical_id),
        arn=str(stack.get_att(resource.logical_id, "Arn")),
        handler=str(resource.prop("Handler", "")),
        runtime=str(resource.prop("Runtime", "")),
        code_dir=code_dir,
        layer_dirs=tuple(layer_dirs),
        external_layers=tuple(external),
        environment={str(k): str(v) for k, v in variables.items()},
        timeout=int(resource.prop("Timeout", 3)),
        memory=int(resource.prop("MemorySize", 128)),
        role_arn=role_arn,
        policies=tuple(policies.get(role_logical, [])) if role_logical else (),
    )


def _role_logical_id(function: Resource) -> str | None:
    role = function.properties.get("Role")
    if isinstance(role, dict) and "Fn::GetAtt" in role:
        target = role["Fn::GetAtt"]
        return str(target[0] if isinstance(target, list) else target.split(".")[0])
    return None


def _role_policies(stack: Stack) -> dict[str, list[dict[str, Any]]]:
    """Role logical id -> its policy documents (inline, attached, managed), resolved."""
    documents: dict[str, list[dict[str, Any]]] = {}
    for role in stack.of_type("AWS::IAM::Role"):
        docs = documents.setdefault(role.logical_id, [])
        for inline in role.prop("Policies") or []:
            docs.append(inline["PolicyDocument"])
        for arn in role.prop("ManagedPolicyArns") or []:
            docs.append(_managed(stack, str(arn), where=role.where))
    for policy in stack.of_type("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
        roles = policy.properties.get("Roles") or []
        for role in roles:
            if isinstance(role, dict) and "Ref" in role:
                documents.setdefault(str(role["Ref"]), []).append(policy.prop("PolicyDocument"))
    return documents


def _managed(stack: Stack, arn: str, *, where: str) -> dict[str, Any]:
    if arn.startswith(_MANAGED_PREFIX):
        name = arn.removeprefix(_MANAGED_PREFIX)
        if name not in MANAGED_POLICIES:
            raise TemplateError(f"{where}: AWS managed policy {name!r} is not known to the artifact mesh")
        return {"Version": "2012-10-17", "Statement": MANAGED_POLICIES[name]}
    for policy in stack.of_type("AWS::IAM::ManagedPolicy"):
        if stack.ref(policy.logical_id) == arn:
            document: dict[str, Any] = policy.prop("PolicyDocument")
            return document
    raise TemplateError(f"{where}: managed policy {arn!r} is neither an AWS managed policy nor in the assembly")


def _event_source(resource: Resource) -> EventSource:
    function = str(resource.prop("FunctionName"))
    stack = resource.stack
    raw = resource.properties.get("FunctionName")
    if isinstance(raw, dict) and "Ref" in raw:
        function = str(stack.get_att(raw["Ref"], "Arn"))
    scaling = resource.prop("ScalingConfig") or {}
    return EventSource(
        logical_id=resource.logical_id,
        function=function,
        queue_arn=str(resource.prop("EventSourceArn")),
        batch_size=int(resource.prop("BatchSize", 10)),
        batching_window=float(resource.prop("MaximumBatchingWindowInSeconds", 0)),
        report_batch_item_failures="ReportBatchItemFailures" in (resource.prop("FunctionResponseTypes") or []),
        max_concurrency=int(scaling["MaximumConcurrency"]) if "MaximumConcurrency" in scaling else None,
        enabled=bool(resource.prop("Enabled", True)),
    )


def _schedule(resource: Resource) -> Schedule:
    expression = resource.prop("ScheduleExpression")
    if expression is None:
        raise TemplateError(f"{resource.where}: only schedule rules are emulated (this rule has an EventPattern)")
    targets = tuple(str(t["Arn"]) for t in resource.prop("Targets") or [])
    return Schedule(resource.logical_id, str(expression), targets, resource.prop("State", "ENABLED") == "ENABLED")


def _methods(stack: Stack) -> list[ApiMethod]:
    paths: dict[str, str] = {}
    for api in stack.of_type("AWS::ApiGateway::RestApi"):
        paths[str(stack.get_att(api.logical_id, "RootResourceId"))] = ""

    def path_of(resource_id: str) -> str:
        if resource_id in paths:
            return paths[resource_id]
        for res in stack.of_type("AWS::ApiGateway::Resource"):
            if stack.ref(res.logical_id) == resource_id:
                paths[resource_id] = f"{path_of(str(res.prop('ParentId')))}/{res.prop('PathPart')}"
                return paths[resource_id]
        raise TemplateError(f"{stack.name}: API resource {resource_id!r} not found")

    methods: list[ApiMethod] = []
    for method in stack.of_type("AWS::ApiGateway::Method"):
        integration = method.prop("Integration") or {}
        function = None
        uri = str(integration.get("Uri", ""))
        if "/functions/" in uri:
            function = uri.split("/functions/", 1)[1].split("/", 1)[0]
        authorizer = None
        raw_authorizer = method.properties.get("AuthorizerId")
        if isinstance(raw_authorizer, dict) and "Ref" in raw_authorizer:
            authorizer = stack.resolve(dict(stack.resource(raw_authorizer["Ref"]).properties), where="authorizer")
        methods.append(
            ApiMethod(
                path=path_of(str(method.prop("ResourceId"))) or "/",
                http_method=str(method.prop("HttpMethod")),
                authorization=str(method.prop("AuthorizationType", "NONE")),
                authorizer=authorizer,
                function=function,
            )
        )
    return methods
