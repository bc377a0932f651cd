"""The rule sandbox's network in the synthesized template: isolated subnets, S3 reads of our buckets only.

A rule reads its job's trial; in a function with internet access it could send what it read (or the
job's credentials) anywhere. The sandbox function runs in a VPC with no internet gateway and no NAT,
whose only route out is an S3 gateway endpoint that lets through reads of the trial and rule buckets.
"""

from __future__ import annotations

from typing import Any

import pytest

from tornasole.stack_spec import DEFAULT_SPEC


def _sandbox(synth: Any) -> dict[str, Any]:
    (props,) = [
        r["Properties"]
        for r in synth.resources("AWS::Lambda::Function").values()
        if r["Properties"].get("Description") == DEFAULT_SPEC.custom_rule.description
    ]
    return props


@pytest.fixture(params=["synth", "imported"])
def shape(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue(request.param)


def test_the_sandbox_runs_in_subnets_with_no_way_out_but_the_s3_endpoint(shape) -> None:
    vpc_config = _sandbox(shape)["VpcConfig"]
    subnets = {s["Ref"] for s in vpc_config["SubnetIds"]}
    assert len(subnets) == 2
    assert not shape.resources("AWS::EC2::InternetGateway")
    assert not shape.resources("AWS::EC2::NatGateway")
    assert not shape.resources("AWS::EC2::EgressOnlyInternetGateway")
    tables = {
        a["Properties"]["RouteTableId"]["Ref"]
        for a in shape.resources("AWS::EC2::SubnetRouteTableAssociation").values()
        if a["Properties"]["SubnetId"]["Ref"] in subnets
    }
    assert len(tables) == 2
    assert not shape.resources("AWS::EC2::Route")  # no route of its own: only the endpoint's
    (endpoint,) = shape.resources("AWS::EC2::VPCEndpoint").values()
    props = endpoint["Properties"]
    assert props["VpcEndpointType"] == "Gateway"
    assert {t["Ref"] for t in props["RouteTableIds"]} == tables
    assert "s3" in str(props["ServiceName"])


def test_the_endpoint_lets_through_reads_of_the_trial_and_rule_buckets_only(shape) -> None:
    (endpoint,) = shape.resources("AWS::EC2::VPCEndpoint").values()
    (statement,) = endpoint["Properties"]["PolicyDocument"]["Statement"]
    assert statement["Effect"] == "Allow"
    assert sorted(statement["Action"]) == ["s3:GetObject", "s3:ListBucket"]
    resources = statement["Resource"]
    assert "*" not in resources
    # each bucket (the trial bucket; the rules bucket where it is another) and its objects, nothing else
    objects = [r for r in resources if str(r).endswith("/*']]}") or str(r).endswith("/*")]
    assert len(resources) == 2 * len(objects)
    assert len(objects) == (2 if "my-rules-bucket" in str(resources) else 1)


def test_the_sandbox_security_group_admits_nothing_and_sends_https_only(shape) -> None:
    (group_ref,) = _sandbox(shape)["VpcConfig"]["SecurityGroupIds"]
    group = shape.json["Resources"][group_ref["Fn::GetAtt"][0]]["Properties"]
    assert not group.get("SecurityGroupIngress")
    assert group["SecurityGroupEgress"] == [
        {
            "CidrIp": "0.0.0.0/0",
            "Description": "S3 through the gateway endpoint",
            "FromPort": 443,
            "IpProtocol": "tcp",
            "ToPort": 443,
        }
    ]


def test_rejected_flows_are_logged_and_the_role_holds_no_managed_policy(shape) -> None:
    (flow_log,) = shape.resources("AWS::EC2::FlowLog").values()
    assert flow_log["Properties"]["TrafficType"] == "REJECT"
    assert flow_log["Properties"]["LogDestinationType"] == "cloud-watch-logs"
    role = _sandbox(shape)["Role"]["Fn::GetAtt"][0]
    assert not shape.json["Resources"][role]["Properties"].get("ManagedPolicyArns")


def test_the_flow_log_can_be_left_out_where_the_target_cannot_create_one(without_flow_log: Any) -> None:
    # MiniStack (the deploy test) refuses AWS::EC2::FlowLog; the rest of the sandbox's network stays
    without = without_flow_log
    assert without.resources("AWS::EC2::FlowLog") == {}
    assert len(without.resources("AWS::EC2::VPCEndpoint")) == 1
    assert _sandbox(without)["VpcConfig"]["SubnetIds"]
