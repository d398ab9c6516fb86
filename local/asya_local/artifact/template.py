"""Read a synthesized cloud assembly (``cdk.out``) and resolve its templates' intrinsic functions.

:func:`load_assembly` reads ``manifest.json``, every ``aws:cloudformation:stack`` artifact's template, and every
nested stack (a resource of type ``AWS::CloudFormation::Stack`` whose ``TemplateURL`` names a template asset of the
assembly, or whose metadata ``aws:asset:path`` names the file). Each :class:`Stack` resolves values on demand:
``Ref``, ``Fn::GetAtt``, ``Fn::Join``, ``Fn::Sub`` (both forms), ``Fn::Select``, ``Fn::Split``, ``Fn::GetAZs``,
``Fn::ImportValue`` (the exports of every stack of the assembly), ``Fn::If``/``Fn::Equals``/``Fn::Not``/``Fn::And``/
``Fn::Or`` with the template's ``Conditions``, the pseudo parameters, the stack's parameters (their ``Default``, or
what the parent stack passes to a nested one) and a nested stack's outputs (``Fn::GetAtt [Nested, Outputs.X]``).

Physical names are what CloudFormation would give: the name property when the template sets one (``QueueName``,
``TableName``, ``BucketName``, ``FunctionName``, ...), else ``{stack}-{logicalid}-{suffix}`` (lower-cased for a
bucket) with a suffix stable for the assembly. ``Ref`` and ``Fn::GetAtt`` of each type follow CloudFormation's
documented return values (a queue's ``Ref`` is its URL, its ``Arn`` attribute the ARN, ...). An intrinsic or
attribute this module does not know is a :class:`TemplateError` naming it and the logical id, never a silent value.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from asya_local.exceptions import LocalModeError

__all__ = ["Assembly", "Resource", "Stack", "TemplateError", "load_assembly"]

_AZS: Final = ("a", "b", "c")
_NAME_PROPERTY: Final[Mapping[str, str]] = {
    "AWS::SQS::Queue": "QueueName",
    "AWS::DynamoDB::Table": "TableName",
    "AWS::S3::Bucket": "BucketName",
    "AWS::Lambda::Function": "FunctionName",
    "AWS::IAM::Role": "RoleName",
    "AWS::IAM::ManagedPolicy": "ManagedPolicyName",
    "AWS::Logs::LogGroup": "LogGroupName",
    "AWS::Events::Rule": "Name",
    "AWS::SNS::Topic": "TopicName",
    "AWS::ApiGateway::Stage": "StageName",
}
_SUB_RE: Final = re.compile(r"\$\{([^}!][^}]*)\}")


class TemplateError(LocalModeError):
    """A template the artifact mesh cannot read: the message names the stack, the logical id and the construct."""


@dataclass(frozen=True, slots=True)
class Resource:
    """One resource of one stack (properties unresolved: resolve them with :meth:`Stack.resolve`)."""

    stack: Stack
    logical_id: str
    type: str
    properties: Mapping[str, Any]
    metadata: Mapping[str, Any]

    def prop(self, name: str, default: Any = None) -> Any:
        """The resolved property ``name`` (``default`` when absent)."""
        if name not in self.properties:
            return default
        return self.stack.resolve(self.properties[name], where=f"{self.logical_id}.{name}")

    @property
    def where(self) -> str:
        return f"{self.stack.name}/{self.logical_id} ({self.type})"


@dataclass
class Stack:
    """One template of the assembly, with the values it resolves against."""

    name: str
    template: Mapping[str, Any]
    assembly: Assembly
    region: str
    account_id: str
    parameters: dict[str, Any] = field(default_factory=dict)
    parent: Stack | None = None
    children: dict[str, Stack] = field(default_factory=dict)

    @property
    def resources(self) -> dict[str, Resource]:
        return {
            lid: Resource(
                self, lid, str(body.get("Type", "")), body.get("Properties") or {}, body.get("Metadata") or {}
            )
            for lid, body in (self.template.get("Resources") or {}).items()
            if self._condition_holds(body.get("Condition"))
        }

    def resource(self, logical_id: str) -> Resource:
        body = (self.template.get("Resources") or {}).get(logical_id)
        if body is None:
            raise TemplateError(f"{self.name}: no resource {logical_id!r}")
        return Resource(
            self, logical_id, str(body.get("Type", "")), body.get("Properties") or {}, body.get("Metadata") or {}
        )

    def of_type(self, *types: str) -> list[Resource]:
        return [r for r in self.resources.values() if r.type in types]

    # -- names -----------------------------------------------------------------------------------------------

    def physical_name(self, logical_id: str) -> str:
        resource = self.resource(logical_id)
        prop = _NAME_PROPERTY.get(resource.type)
        if prop and prop in resource.properties:
            return str(self.resolve(resource.properties[prop], where=f"{logical_id}.{prop}"))
        suffix = hashlib.sha256(f"{self.name}/{logical_id}".encode()).hexdigest()[:12].upper()
        name = f"{self.name}-{logical_id}-{suffix}"
        if resource.type == "AWS::S3::Bucket":
            return name.lower()[:63]
        if resource.type == "AWS::Lambda::Function":
            return name[:64]
        return name

    def _arn(self, service: str, rest: str, *, region: bool = True, account: bool = True) -> str:
        return f"arn:aws:{service}:{self.region if region else ''}:{self.account_id if account else ''}:{rest}"

    def ref(self, logical_id: str) -> Any:
        if logical_id in self.parameters:
            return self.parameters[logical_id]
        pseudo = self._pseudo(logical_id)
        if pseudo is not None:
            return pseudo
        params = self.template.get("Parameters") or {}
        if logical_id in params:
            if "Default" not in params[logical_id]:
                raise TemplateError(f"{self.name}: parameter {logical_id!r} has no value and no Default")
            return params[logical_id]["Default"]
        resource = self.resource(logical_id)
        name = self.physical_name(logical_id)
        match resource.type:
            case "AWS::SQS::Queue":
                return f"{self.assembly.endpoint_url}/{self.account_id}/{name}"
            case "AWS::Lambda::LayerVersion":
                return self._arn("lambda", f"layer:{name}:1")
            case "AWS::SNS::Topic":
                return self._arn("sns", name)
            case "AWS::IAM::ManagedPolicy":
                return self._arn("iam", f"policy/{name}", region=False)
            case "AWS::CloudFormation::Stack":
                return self._arn("cloudformation", f"stack/{self.name}-{logical_id}/local")
            case "AWS::SecretsManager::Secret":
                # a partial ARN (no random suffix): Secrets Manager and moto find the secret by it
                return self._arn("secretsmanager", f"secret:{name}")
            case _:
                return name

    def get_att(self, logical_id: str, attribute: str) -> Any:
        resource = self.resource(logical_id)
        name = self.physical_name(logical_id)
        key = (resource.type, attribute)
        if resource.type == "AWS::CloudFormation::Stack" and attribute.startswith("Outputs."):
            return self.child(logical_id).output(attribute.removeprefix("Outputs."))
        values: dict[tuple[str, str], Any] = {
            ("AWS::SQS::Queue", "Arn"): self._arn("sqs", name),
            ("AWS::SQS::Queue", "QueueName"): name,
            ("AWS::SQS::Queue", "QueueUrl"): self.ref(logical_id),
            ("AWS::DynamoDB::Table", "Arn"): self._arn("dynamodb", f"table/{name}"),
            ("AWS::DynamoDB::Table", "StreamArn"): self._arn("dynamodb", f"table/{name}/stream/local"),
            ("AWS::S3::Bucket", "Arn"): f"arn:aws:s3:::{name}",
            ("AWS::S3::Bucket", "DomainName"): f"{name}.s3.amazonaws.com",
            ("AWS::S3::Bucket", "RegionalDomainName"): f"{name}.s3.{self.region}.amazonaws.com",
            ("AWS::Lambda::Function", "Arn"): self._arn("lambda", f"function:{name}"),
            ("AWS::IAM::Role", "Arn"): self._arn("iam", f"role/{name}", region=False),
            ("AWS::IAM::Role", "RoleId"): f"AROA{hashlib.sha256(name.encode()).hexdigest()[:17].upper()}",
            ("AWS::Logs::LogGroup", "Arn"): self._arn("logs", f"log-group:{name}:*"),
            ("AWS::Events::Rule", "Arn"): self._arn("events", f"rule/{name}"),
            ("AWS::SNS::Topic", "TopicArn"): self._arn("sns", name),
            ("AWS::SNS::Topic", "TopicName"): name,
            ("AWS::ApiGateway::RestApi", "RootResourceId"): f"{name}-root",
            ("AWS::ApiGateway::RestApi", "RestApiId"): name,
            ("AWS::Lambda::LayerVersion", "LayerVersionArn"): self.ref(logical_id),
            ("AWS::EC2::SecurityGroup", "GroupId"): f"sg-{hashlib.sha256(name.encode()).hexdigest()[:17]}",
            ("AWS::EC2::VPC", "CidrBlock"): "10.0.0.0/16",
            ("AWS::Backup::BackupVault", "BackupVaultArn"): self._arn("backup", f"backup-vault:{name}"),
            ("AWS::Backup::BackupVault", "BackupVaultName"): name,
            ("AWS::Backup::BackupPlan", "BackupPlanId"): name,
        }
        if key not in values:
            raise TemplateError(f"{self.name}/{logical_id}: attribute {attribute!r} of {resource.type} is not known")
        return values[key]

    def _pseudo(self, name: str) -> str | list[str] | None:
        pseudo: dict[str, Any] = {
            "AWS::AccountId": self.account_id,
            "AWS::Region": self.region,
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::StackName": self.name,
            "AWS::StackId": self._arn("cloudformation", f"stack/{self.name}/local"),
            "AWS::NotificationARNs": [],
            "AWS::NoValue": None,
        }
        return pseudo.get(name)

    def child(self, logical_id: str) -> Stack:
        if logical_id not in self.children:
            raise TemplateError(f"{self.name}/{logical_id}: the nested stack's template was not found in the assembly")
        return self.children[logical_id]

    def output(self, name: str) -> Any:
        outputs = self.template.get("Outputs") or {}
        if name not in outputs:
            raise TemplateError(f"{self.name}: no output {name!r}")
        return self.resolve(outputs[name]["Value"], where=f"Outputs.{name}")

    def exports(self) -> Iterator[tuple[str, Any]]:
        for name, body in (self.template.get("Outputs") or {}).items():
            if "Export" in body:
                yield str(self.resolve(body["Export"]["Name"], where=f"Outputs.{name}.Export")), body["Value"]

    # -- resolution ------------------------------------------------------------------------------------------

    def _condition_holds(self, condition: str | None) -> bool:
        if condition is None:
            return True
        conditions = self.template.get("Conditions") or {}
        if condition not in conditions:
            raise TemplateError(f"{self.name}: no condition {condition!r}")
        return bool(self.resolve(conditions[condition], where=f"Conditions.{condition}"))

    def resolve(self, value: Any, *, where: str = "") -> Any:
        if isinstance(value, list):
            return [v for v in (self.resolve(item, where=where) for item in value) if v is not None]
        if not isinstance(value, dict):
            return value
        if len(value) != 1:
            return {k: self.resolve(v, where=f"{where}.{k}") for k, v in value.items()}
        ((key, arg),) = value.items()
        match key:
            case "Ref":
                return self.ref(str(arg))
            case "Fn::GetAtt":
                logical, _, attr = arg.partition(".") if isinstance(arg, str) else (arg[0], ".", arg[1])
                return self.get_att(str(logical), str(self.resolve(attr, where=where)))
            case "Fn::Join":
                sep, items = arg
                return str(sep).join(str(x) for x in self.resolve(items, where=where))
            case "Fn::Select":
                index, items = arg
                return self.resolve(items, where=where)[int(self.resolve(index, where=where))]
            case "Fn::Split":
                sep, text = arg
                return str(self.resolve(text, where=where)).split(str(sep))
            case "Fn::GetAZs":
                return [f"{self.region}{az}" for az in _AZS]
            case "Fn::Sub":
                return self._sub(arg, where=where)
            case "Fn::ImportValue":
                return self.assembly.export(str(self.resolve(arg, where=where)))
            case "Fn::Base64":
                import base64

                return base64.b64encode(str(self.resolve(arg, where=where)).encode()).decode()
            case "Fn::If":
                condition, then, otherwise = arg
                return self.resolve(then if self._condition_holds(condition) else otherwise, where=where)
            case "Fn::Equals":
                left, right = (self.resolve(x, where=where) for x in arg)
                return str(left) == str(right)
            case "Fn::Not":
                return not self.resolve(arg[0], where=where)
            case "Fn::And":
                return all(self.resolve(x, where=where) for x in arg)
            case "Fn::Or":
                return any(self.resolve(x, where=where) for x in arg)
            case "Condition":
                return self._condition_holds(str(arg))
            case _ if key.startswith("Fn::"):
                raise TemplateError(f"{self.name}: {where}: intrinsic {key} is not supported by the artifact mesh")
            case _:
                return {key: self.resolve(arg, where=f"{where}.{key}")}

    def _sub(self, arg: Any, *, where: str) -> str:
        text, variables = (arg, {}) if isinstance(arg, str) else (arg[0], arg[1])
        local = {k: self.resolve(v, where=where) for k, v in variables.items()}

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in local:
                return str(local[name])
            if "." in name and not name.startswith("AWS::"):
                logical, attr = name.split(".", 1)
                return str(self.get_att(logical, attr))
            return str(self.ref(name))

        return _SUB_RE.sub(replace, str(text)).replace("${!", "${")


class Assembly:
    """A cloud assembly directory: its stacks (top-level, nested ones reachable through ``Stack.children``) and its
    file assets."""

    def __init__(self, directory: Path, *, region: str, account_id: str, endpoint_url: str) -> None:
        self.directory = directory
        self.region = region
        self.account_id = account_id
        self.endpoint_url = endpoint_url
        self.stacks: list[Stack] = []
        self._assets: dict[str, Path] = {}

    def all_stacks(self) -> list[Stack]:
        found: list[Stack] = []

        def walk(stack: Stack) -> None:
            found.append(stack)
            for child in stack.children.values():
                walk(child)

        for stack in self.stacks:
            walk(stack)
        return found

    def export(self, name: str) -> Any:
        for stack in self.all_stacks():
            for export, value in stack.exports():
                if export == name:
                    return stack.resolve(value, where=f"export {name}")
        raise TemplateError(f"Fn::ImportValue {name!r}: no stack of the assembly exports it")

    def asset_dir(self, object_key: str, *, where: str) -> Path:
        """The staged directory of the file asset uploaded as ``object_key`` (``<hash>.zip``)."""
        path = self._assets.get(object_key)
        if path is None:
            raise TemplateError(f"{where}: asset {object_key!r} is not in {self.directory} (was cdk.out synthesized?)")
        return path

    def register_assets(self, assets_file: Path) -> None:
        data = json.loads(assets_file.read_text(encoding="utf-8"))
        for body in (data.get("files") or {}).values():
            source = self.directory / body["source"]["path"]
            for destination in (body.get("destinations") or {}).values():
                self._assets[str(destination["objectKey"])] = source


def load_assembly(
    directory: str | Path, *, region: str = "us-east-1", account_id: str = "123456789012", endpoint_url: str = ""
) -> Assembly:
    """The assembly at ``directory``: every stack artifact of its ``manifest.json``, nested stacks attached."""
    root = Path(directory).resolve()
    manifest_file = root / "manifest.json"
    if not manifest_file.is_file():
        raise TemplateError(f"{root} is not a cloud assembly (no manifest.json): run `make synth` or `cdk synth`")
    manifest = json.loads(manifest_file.read_text(encoding="utf-8"))
    assembly = Assembly(root, region=region, account_id=account_id, endpoint_url=endpoint_url.rstrip("/"))
    artifacts = manifest.get("artifacts") or {}
    for body in artifacts.values():
        if body.get("type") == "cdk:asset-manifest":
            assembly.register_assets(root / body["properties"]["file"])
    for name, body in artifacts.items():
        if body.get("type") != "aws:cloudformation:stack":
            continue
        template = json.loads((root / body["properties"]["templateFile"]).read_text(encoding="utf-8"))
        stack = Stack(name=name, template=template, assembly=assembly, region=region, account_id=account_id)
        _attach_nested(stack, root)
        assembly.stacks.append(stack)
    if not assembly.stacks:
        raise TemplateError(f"{manifest_file}: no aws:cloudformation:stack artifact")
    return assembly


def _asset_source(root: Path, asset_hash: str) -> str:
    """The file of the assembly's file asset ``asset_hash`` (``*.assets.json``), or ``asset_hash`` when none has it."""
    for manifest in sorted(root.glob("*.assets.json")):
        entry = json.loads(manifest.read_text(encoding="utf-8")).get("files", {}).get(asset_hash)
        if entry is not None:
            return str(entry["source"]["path"])
    return asset_hash


def _attach_nested(stack: Stack, root: Path) -> None:
    for resource in stack.of_type("AWS::CloudFormation::Stack"):
        path = resource.metadata.get("aws:asset:path")
        if path is None:
            url = str(resource.prop("TemplateURL", ""))
            path = url.rsplit("/", 1)[-1]
            candidate = root / path
            if not candidate.is_file():
                candidate = root / f"{path.removesuffix('.json')}.nested.template.json"
            if not candidate.is_file():
                # without asset metadata the URL names the asset's hash: the asset manifests map it to the file
                candidate = root / _asset_source(root, path.removesuffix(".json"))
            path = candidate.name
        template_file = root / str(path)
        if not template_file.is_file():
            raise TemplateError(f"{resource.where}: nested template {template_file} not found")
        template = json.loads(template_file.read_text(encoding="utf-8"))
        child = Stack(
            name=f"{stack.name}-{resource.logical_id}",
            template=template,
            assembly=stack.assembly,
            region=stack.region,
            account_id=stack.account_id,
            parent=stack,
        )
        # parameters are resolved in the parent, lazily enough: a parent value never refers to the child
        child.parameters = {
            k: stack.resolve(v, where=f"{resource.logical_id}.Parameters.{k}")
            for k, v in (resource.properties.get("Parameters") or {}).items()
        }
        stack.children[resource.logical_id] = child
        _attach_nested(child, root)
