"""The VPC the mesh's functions run in, with the endpoints they need so that no traffic needs a NAT.

Which VPC (first match): the construct's ``vpc`` prop (with ``vpc_subnets``); the manifest's ``deployment.vpc`` with
``vpc_id`` (its ``subnet_ids``, ``availability_zones`` and ``route_table_ids``); else a VPC created here: two zones,
one isolated subnet each (no internet gateway, no NAT), the default security group left as AWS creates it.

Endpoints (unless ``deployment.vpc.endpoints: false``), for the services the functions call:

- gateway endpoints (free) for S3 and DynamoDB, on the subnets' route tables;
- interface endpoints with private DNS (billed per hour and zone) for SQS and CloudWatch (the gateway's queue
  metrics, GW-OPS-3) always; KMS with a customer-managed key; Secrets Manager when the gateway reads a secret; X-Ray
  when a function is traced. CloudWatch Logs is not one: Lambda ships a function's logs itself.

Security groups: the functions' group has no ingress and egress on 443 only, to the endpoints' group and to the S3 /
DynamoDB prefix lists when given (``prefix_list_ids``), else to any address, which in subnets without a NAT reaches
nothing but the gateway endpoints' routes. The endpoints' group admits 443 from the functions' group only.

:meth:`MeshNetwork.attach` puts a function into the subnets (``VpcConfig``) with the functions' group and gives its
role ``AWSLambdaVPCAccessExecutionRole`` (the network interfaces Lambda creates on its behalf).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from asya.manifest import Manifest, VpcConfig
from asya_cdk.nag import acknowledge

__all__ = ["INTERFACE_SERVICES", "MeshNetwork", "endpoint_services", "network_problems", "place_functions"]

_HTTPS: Final = ec2.Port.tcp(443)
_VPC_ACCESS: Final = "service-role/AWSLambdaVPCAccessExecutionRole"
#: Interface endpoint services by the name :class:`MeshNetwork` takes.
INTERFACE_SERVICES: Final = {
    "sqs": ec2.InterfaceVpcEndpointAwsService.SQS,
    "monitoring": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_MONITORING,
    "kms": ec2.InterfaceVpcEndpointAwsService.KMS,
    "secretsmanager": ec2.InterfaceVpcEndpointAwsService.SECRETS_MANAGER,
    "xray": ec2.InterfaceVpcEndpointAwsService.XRAY,
}
_IDS: Final = {
    "sqs": "Sqs",
    "monitoring": "Monitoring",
    "kms": "Kms",
    "secretsmanager": "SecretsManager",
    "xray": "XRay",
}


class MeshNetwork(Construct):
    """The functions' VPC, subnets, security groups and endpoints."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: VpcConfig,
        services: Sequence[str],
        vpc: ec2.IVpc | None = None,
        vpc_subnets: ec2.SubnetSelection | None = None,
    ) -> None:
        unknown = sorted(set(services) - set(INTERFACE_SERVICES))
        if unknown:
            raise ValueError(f"MeshNetwork services: {unknown} unknown; use {sorted(INTERFACE_SERVICES)}")
        super().__init__(scope, id)
        self._vpc, self._subnets = self._choose(config, vpc, vpc_subnets)
        self._functions_group = ec2.SecurityGroup(
            self,
            "FunctionsSecurityGroup",
            vpc=self._vpc,
            description="asya functions: no ingress, HTTPS egress to the VPC endpoints",
            allow_all_outbound=False,
        )
        self._endpoints_group = ec2.SecurityGroup(
            self,
            "EndpointsSecurityGroup",
            vpc=self._vpc,
            description="asya VPC endpoints: HTTPS from the functions only",
            allow_all_outbound=False,
        )
        self._endpoints_group.add_ingress_rule(self._functions_group, _HTTPS, "HTTPS from the asya functions")
        self._functions_group.add_egress_rule(self._endpoints_group, _HTTPS, "HTTPS to the interface endpoints")
        if config.prefix_list_ids and not config.internet_egress:
            for index, prefix_list in enumerate(config.prefix_list_ids):
                self._functions_group.add_egress_rule(
                    ec2.Peer.prefix_list(prefix_list), _HTTPS, f"HTTPS to the gateway endpoint of prefix list {index}"
                )
            # every rule above is a resource of its own, and a group with no inline egress keeps EC2's default
            # allow-all rule: CDK's own "match no traffic" marker, inline, removes it
            self._functions_group.add_egress_rule(
                ec2.Peer.ipv4("255.255.255.255/32"), ec2.Port.icmp_type_and_code(252, 86), "Disallow all traffic"
            )
        else:
            self._functions_group.add_egress_rule(
                ec2.Peer.any_ipv4(),
                _HTTPS,
                "HTTPS to the S3 and DynamoDB gateway endpoints"
                + (" and the internet (the VPC's NAT)" if config.internet_egress else " (no other route: no NAT)"),
            )
        self._gateway_endpoints: dict[str, ec2.GatewayVpcEndpoint] = {}
        self._interface_endpoints: dict[str, ec2.InterfaceVpcEndpoint] = {}
        if config.endpoints:
            for name, gateway_service in (
                ("S3", ec2.GatewayVpcEndpointAwsService.S3),
                ("DynamoDb", ec2.GatewayVpcEndpointAwsService.DYNAMODB),
            ):
                self._gateway_endpoints[name] = ec2.GatewayVpcEndpoint(
                    self, f"{name}Endpoint", vpc=self._vpc, service=gateway_service, subnets=[self._subnets]
                )
            for name in dict.fromkeys(services):
                self._interface_endpoints[name] = ec2.InterfaceVpcEndpoint(
                    self,
                    f"{_IDS[name]}Endpoint",
                    vpc=self._vpc,
                    service=INTERFACE_SERVICES[name],
                    private_dns_enabled=True,
                    subnets=self._subnets,
                    security_groups=[self._endpoints_group],
                    # open=True would admit the VPC's whole CIDR; the functions' group is enough
                    open=False,
                )

    def _choose(
        self, config: VpcConfig, vpc: ec2.IVpc | None, vpc_subnets: ec2.SubnetSelection | None
    ) -> tuple[ec2.IVpc, ec2.SubnetSelection]:
        if vpc is not None:
            return vpc, vpc_subnets or ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)
        if config.vpc_id is not None:
            imported = ec2.Vpc.from_vpc_attributes(
                self, "Vpc", vpc_id=config.vpc_id, availability_zones=sorted(set(config.availability_zones))
            )
            subnets = [
                ec2.Subnet.from_subnet_attributes(
                    self, f"Subnet{index}", subnet_id=subnet, availability_zone=zone, route_table_id=table
                )
                for index, (subnet, zone, table) in enumerate(
                    zip(config.subnet_ids, config.availability_zones, config.route_table_ids, strict=True)
                )
            ]
            return imported, ec2.SubnetSelection(subnets=subnets)
        created = ec2.Vpc(
            self,
            "Vpc",
            max_azs=2,
            nat_gateways=0,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="functions", subnet_type=ec2.SubnetType.PRIVATE_ISOLATED, cidr_mask=22)
            ],
            # True adds a custom resource (a Lambda function) only to empty the default group's rules
            restrict_default_security_group=False,
        )
        acknowledge(
            created,
            "AwsSolutions-VPC7",
            "Isolated subnets with no internet route: the functions reach AWS only through the mesh's endpoints; "
            "flow logs are an account-level choice (docs/deploy.md, VPC).",
        )
        return created, ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_ISOLATED)

    def attach(self, function: lambda_.Function) -> None:
        """Run ``function`` in the mesh's subnets with the functions' security group."""
        cfn = function.node.default_child
        assert isinstance(cfn, lambda_.CfnFunction), function.node.path
        chosen = self._subnets
        subnet_ids = self._vpc.select_subnets(
            availability_zones=chosen.availability_zones,
            one_per_az=chosen.one_per_az,
            subnet_filters=chosen.subnet_filters,
            subnet_group_name=chosen.subnet_group_name,
            subnet_type=chosen.subnet_type,
            subnets=chosen.subnets,
        ).subnet_ids
        cfn.vpc_config = lambda_.CfnFunction.VpcConfigProperty(
            security_group_ids=[self._functions_group.security_group_id], subnet_ids=subnet_ids
        )
        role = function.role
        assert role is not None, function.node.path
        role.add_managed_policy(iam.ManagedPolicy.from_aws_managed_policy_name(_VPC_ACCESS))
        acknowledge(
            function,
            f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{_VPC_ACCESS}]",
            "Lambda creates and deletes the function's network interfaces in the mesh's subnets with it "
            "(what CDK attaches to every function in a VPC).",
        )
        # the interface endpoints answer the functions' first calls: none of them may start before they exist
        for endpoint in self._interface_endpoints.values():
            function.node.add_dependency(endpoint)

    @property
    def vpc(self) -> ec2.IVpc:
        return self._vpc

    @property
    def subnets(self) -> ec2.SubnetSelection:
        return self._subnets

    @property
    def functions_security_group(self) -> ec2.SecurityGroup:
        return self._functions_group

    @property
    def endpoints_security_group(self) -> ec2.SecurityGroup:
        return self._endpoints_group

    @property
    def interface_endpoints(self) -> dict[str, ec2.InterfaceVpcEndpoint]:
        return dict(self._interface_endpoints)

    @property
    def gateway_endpoints(self) -> dict[str, ec2.GatewayVpcEndpoint]:
        return dict(self._gateway_endpoints)


def network_problems(manifest: Manifest, *, vpc_given: bool, subnets_given: bool) -> list[str]:
    """What keeps the mesh's functions from working in the chosen VPC, one line each (checked before synthesis)."""
    problems: list[str] = []
    config = manifest.deployment.vpc
    if subnets_given and not vpc_given:
        problems.append("vpc_subnets: given without vpc; pass the VPC they belong to as vpc")
    if vpc_given and config is not None and config.vpc_id is not None:
        problems.append(f"vpc, deployment.vpc.vpc_id {config.vpc_id!r}: give one or the other, not both")
    if not (vpc_given or config is not None) or (config is not None and config.internet_egress):
        return problems
    fix = "set deployment.vpc.internet_egress: true with a vpc_id whose subnets route to a NAT, or deploy without a VPC"
    if manifest.gateway.auth.mode == "jwt":
        problems.append(
            f"gateway.auth.mode: 'jwt' fetches jwks_url {manifest.gateway.auth.jwks_url!r} from the internet, which "
            f"the mesh's VPC cannot reach (no NAT); {fix}"
        )
    if manifest.gateway.callback_url is not None:
        problems.append(
            f"gateway.callback_url: {manifest.gateway.callback_url!r} is called by the actors over the internet, "
            f"which the mesh's VPC cannot reach (no NAT); {fix}"
        )
    return problems


def endpoint_services(manifest: Manifest, *, key: bool) -> list[str]:
    """The interface endpoints the mesh's functions call through (besides the S3 and DynamoDB gateway endpoints)."""
    # secretsmanager: every mesh has the reporter keys' secret, which the gateway functions and the edge authorizer
    # read (GW-EDGE-2), besides an api_key mode's key secret
    services = ["sqs", "monitoring", "secretsmanager"]
    if key:
        services.append("kms")
    if any(actor.tracing for actor in manifest.deployed_actors()):
        services.append("xray")
    return services


def place_functions(
    scope: Construct,
    manifest: Manifest,
    *,
    key: kms.IKey | None,
    vpc: ec2.IVpc | None,
    vpc_subnets: ec2.SubnetSelection | None,
) -> MeshNetwork | None:
    """Put every function under ``scope`` into the VPC of ``deployment.vpc`` or the ``vpc`` prop, with the endpoints
    their calls need (``Network``); ``None`` when neither is set."""
    config = manifest.deployment.vpc
    if vpc is None and config is None:
        return None
    network = MeshNetwork(
        scope,
        "Network",
        config=config or VpcConfig(),
        services=endpoint_services(manifest, key=key is not None),
        vpc=vpc,
        vpc_subnets=vpc_subnets,
    )
    for construct in scope.node.find_all():
        if isinstance(construct, lambda_.Function):
            network.attach(construct)
    return network
