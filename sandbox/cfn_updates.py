"""A second deploy into the sandbox, as CloudFormation updates a stack (issue 18, point 13).

Two gaps in moto 5.2's ``UpdateStack`` stop an upgrade from being rehearsed:

1. **Previous parameter values.** The CDK CLI updates a stack with ``UsePreviousValue`` for
   the parameters it did not set, such as ``BootstrapVersion``. moto looks the previous value
   up among the values given at creation only, so a parameter that took its default fails the
   update with ``KeyError: 'BootstrapVersion'``. CloudFormation's previous value of such a
   parameter is its default: the shim leaves it out, and moto applies the template's default.
2. **Exports.** moto registers a stack's exports when the stack is created and never again:
   an update neither adds the new exports nor drops the removed ones, and nothing stops an
   update from removing an export that another stack imports. CloudFormation refuses that
   update ("Export ... cannot be deleted as it is in use by ..."), as it refuses changing the
   value of an export in use. The shim enforces both rules and keeps the exports current.
3. **SSM parameters' tags.** The training roles' ARNs reach the launcher stack through
   ``AWS::SSM::Parameter`` resources (not exports, so that an upgrade may remove a role).
   CloudFormation gives their ``Tags`` as an object; moto 5.2 expects the API's list of
   ``{Key, Value}`` and fails the stack. The shim turns the object into that list.
4. **Lambda versions after an update.** CloudFormation updates a function before it creates
   the new ``AWS::Lambda::Version`` that depends on it, and Lambda publishes the updated
   code and configuration. moto 5.2 creates added resources before it updates changed ones,
   and its update of a function through CloudFormation leaves the "changed since the last
   version" flag unset: the new version resource answered the old version, and the aliases
   kept running the old environment (a single-team trigger behind a team's alias). The shim
   updates the function from the new template before its new version is published, and sets
   the flag on every such update.
5. **Lambda aliases after an update.** The sandbox's ``AWS::Lambda::Alias`` (moto has none;
   ``sandbox/server.py``) could only be created: an alias whose version changed lost its
   ``Ref`` (a policy naming it lost its resource) and kept the old version. The shim
   updates the alias to the new version and deletes a removed alias.

Neither changes what the platform synthesizes; both make the sandbox stricter or closer to
CloudFormation, so an upgrade that would fail on AWS fails here too.
"""

from __future__ import annotations

import json
import threading
from typing import Any

_patched = False
_UPDATING = threading.local()  # the resource map an UpdateStack is applying, on its thread


def apply_update_shims() -> None:
    global _patched
    if _patched:
        return
    _patched = True
    _previous_parameter_values()
    _export_rules()
    _ssm_parameter_tags()
    _function_updates_publish()
    _alias_updates()


def _previous_parameter_values() -> None:
    from moto.cloudformation.models import CloudFormationBackend

    original = CloudFormationBackend._resolve_update_parameters

    def resolve(self: Any, instance: Any, incoming_params: list[dict[str, Any]]) -> Any:
        known = instance.parameters or {}
        kept = [
            p
            for p in incoming_params
            if not p.get("UsePreviousValue") or p["ParameterKey"] in known
        ]
        return original(self, instance, kept)

    CloudFormationBackend._resolve_update_parameters = resolve


def importers(backend: Any, export_name: str, *, besides: Any) -> list[str]:
    """The names of the stacks (other than ``besides``) whose template imports the export."""
    return sorted(
        stack.name
        for stack in backend.stacks.values()
        if stack is not besides and export_name in imported_names(stack.template_dict)
    )


def imported_names(node: Any) -> set[str]:
    """Every literal ``Fn::ImportValue`` name in a template (the CDK writes literal names)."""
    found: set[str] = set()
    if isinstance(node, dict):
        value = node.get("Fn::ImportValue")
        if isinstance(value, str):
            found.add(value)
        for child in node.values():
            found |= imported_names(child)
    elif isinstance(node, list):
        for child in node:
            found |= imported_names(child)
    return found


def exported_names(template: str) -> set[str] | None:
    """The literal export names of a template's outputs; None when it cannot be read here."""
    try:
        body = json.loads(template)
    except ValueError:
        return None
    names = {output.get("Export", {}).get("Name") for output in body.get("Outputs", {}).values()}
    names.discard(None)
    return names if all(isinstance(n, str) for n in names) else None


def _export_rules() -> None:
    from moto.cloudformation.exceptions import ValidationError
    from moto.cloudformation.models import CloudFormationBackend

    original = CloudFormationBackend.update_stack

    def update_stack(
        self: Any, name: str, template: str, role_arn: Any, parameters: Any, tags: Any
    ) -> Any:
        stack = self.get_stack(name)
        before = {export.name: export.value for export in stack.exports}
        after = exported_names(template)
        for export_name in sorted(before):
            users = importers(self, export_name, besides=stack)
            if after is not None and export_name not in after and users:
                raise ValidationError(
                    stack.stack_id,
                    message=f"Export {export_name} cannot be deleted as it is in use by "
                    f"{', '.join(users)}",
                )
        updated = original(self, name, template, role_arn, parameters, tags)
        for export_name in before:
            self.exports.pop(export_name, None)
        changed = []
        for export in updated.exports:
            self.exports[export.name] = export
            moved = export.name in before and before[export.name] != export.value
            if moved and importers(self, export.name, besides=updated):
                changed.append(export.name)
        if changed:
            raise ValidationError(
                stack.stack_id,
                message=f"Cannot update export {changed[0]} as it is in use by "
                f"{', '.join(importers(self, changed[0], besides=updated))}",
            )
        return updated

    CloudFormationBackend.update_stack = update_stack


def _ssm_parameter_tags() -> None:
    from moto.ssm.models import Parameter

    original = Parameter.create_from_cloudformation_json.__func__

    def create(
        cls: Any, resource_name: str, cloudformation_json: Any, *args: Any, **kwargs: Any
    ) -> Any:
        props = cloudformation_json.get("Properties", {})
        tags = props.get("Tags")
        if isinstance(tags, dict):
            props["Tags"] = [{"Key": k, "Value": v} for k, v in tags.items()]
        return original(cls, resource_name, cloudformation_json, *args, **kwargs)

    Parameter.create_from_cloudformation_json = classmethod(create)


def _function_updates_publish() -> None:
    from moto.awslambda.models import LambdaFunction

    original = LambdaFunction.update_from_cloudformation_json.__func__

    def update(cls: Any, original_resource: Any, *args: Any, **kwargs: Any) -> Any:
        updated = original(cls, original_resource, *args, **kwargs)
        updated.code_or_config_updated = True
        return updated

    LambdaFunction.update_from_cloudformation_json = classmethod(update)

    from moto.cloudformation.parsing import ResourceMap

    original_map_update = ResourceMap.update

    def map_update(self: Any, template: Any, parameters: Any = None) -> Any:
        _UPDATING.map = self
        try:
            return original_map_update(self, template, parameters)
        finally:
            _UPDATING.map = None

    ResourceMap.update = map_update


def update_function_first(function_name: str, account_id: str, region: str) -> None:
    """Called as an ``AWS::Lambda::Version`` is created (moto's one hook on versions is
    ``sandbox/server.py``'s): during an update, update the function it publishes from the new
    template first, as CloudFormation does (point 4 above); outside an update, nothing."""
    from moto.awslambda.models import LambdaFunction
    from moto.cloudformation.parsing import parse_and_update_resource

    resources = getattr(_UPDATING, "map", None)
    if resources is None:
        return
    for logical, parsed in list(resources._parsed_resources.items()):
        if (
            isinstance(parsed, LambdaFunction)
            and function_name in (parsed.function_name, parsed.function_arn)
            and logical in resources._resource_json_map
        ):
            resources._parsed_resources[logical] = parse_and_update_resource(
                logical,
                resources._resource_json_map[logical],
                resources,
                account_id=account_id,
                region_name=region,
            )


def alias_fields(props: dict[str, Any]) -> dict[str, Any]:
    """moto's create_alias/update_alias arguments from an ``AWS::Lambda::Alias``'s properties."""
    return {
        "name": props["Name"],
        "function_name": props["FunctionName"],
        "function_version": str(props["FunctionVersion"]),
        "description": props.get("Description", ""),
        "routing_config": props.get("RoutingConfig"),
    }


def _alias_updates() -> None:
    from moto.awslambda.models import get_backend
    from moto.cloudformation import parsing

    alias_class = parsing.get_model_map()["AWS::Lambda::Alias"]

    def update(
        cls: Any,
        original_resource: Any,
        new_resource_name: str,
        cloudformation_json: Any,
        account_id: str,
        region_name: str,
    ) -> Any:
        fields = alias_fields(cloudformation_json["Properties"])
        alias = get_backend(account_id, region_name).update_alias(**fields)
        return cls(alias.arn)

    def delete(self: Any, account_id: str, region_name: str) -> None:
        function, name = self.physical_resource_id.split(":function:", 1)[1].rsplit(":", 1)
        get_backend(account_id, region_name).delete_alias(name, function)

    alias_class.update_from_cloudformation_json = classmethod(update)
    alias_class.delete = delete
