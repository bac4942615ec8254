"""Runs in the scanners' own virtualenv (.venv-scan, `make setup`): JSON in on stdin, JSON out.

{"actions": ["s3:GetObject", "kms:Encrypt*", …]} -> {"actions": {pattern: {action: [entry, …]}}}:
each action (a wildcard expanded over the service's actions) with policy_sentry's entries for it:
{"arn": resource ARN format or "*", "conditions": [condition keys]}; an unknown action maps to {}.
{"policies": [{"id", "kind", "document"}]} -> {"parliament": [finding], "cloudsplaining": [finding]}.
"""

from __future__ import annotations

import fnmatch
import json
import sys
from typing import Any


def action_data(patterns: list[str]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    from policy_sentry.querying.actions import get_action_data, get_actions_for_service

    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    services: dict[str, list[str]] = {}
    for pattern in patterns:
        service = pattern.partition(":")[0]
        if service not in services:
            services[service] = get_actions_for_service(service) or []
        matched = [a for a in services[service] if fnmatch.fnmatchcase(a.lower(), pattern.lower())]
        found: dict[str, list[dict[str, Any]]] = {}
        for action in matched:
            data = get_action_data(service, action.split(":", 1)[1]) or {}
            found[action] = [
                {"arn": e["resource_arn_format"], "conditions": e["condition_keys"]}
                for e in data.get(service, [])
                if e["action"].lower() == action.lower()
            ]
        out[pattern] = found
    return out


def parliament_findings(policies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from parliament import analyze_policy_string

    findings = []
    for p in policies:
        analyzed = analyze_policy_string(json.dumps(p["document"]), include_community_auditors=True)
        for f in analyzed.findings:
            findings.append(
                {
                    "id": p["id"],
                    "issue": f.issue,
                    "severity": f.severity,
                    "detail": str(f.detail)[:500],
                    "location": {k: v for k, v in (f.location or {}).items() if k != "filepath"},
                }
            )
    return findings


CLOUDSPLAINING = {
    "PrivilegeEscalation": "allows_privilege_escalation",
    "DataExfiltration": "allows_data_exfiltration_actions",
    "ResourceExposure": "permissions_management_without_constraints",
    "CredentialsExposure": "credentials_exposure",
    "ServiceWildcard": "service_wildcard",
    "InfrastructureModification": "infrastructure_modification",
}


def cloudsplaining_findings(policies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    from cloudsplaining.scan.policy_document import PolicyDocument

    findings = []
    for p in policies:
        if p["kind"] != "identity":
            continue
        doc = PolicyDocument(p["document"])
        for risk, attribute in CLOUDSPLAINING.items():
            for item in getattr(doc, attribute):
                action = item["type"] if isinstance(item, dict) else item
                findings.append({"id": p["id"], "risk": risk, "action": str(action)})
    return findings


def main() -> None:
    request = json.load(sys.stdin)
    answer: dict[str, Any] = {}
    if "actions" in request:
        answer["actions"] = action_data(request["actions"])
    if "policies" in request:
        answer["parliament"] = parliament_findings(request["policies"])
        answer["cloudsplaining"] = cloudsplaining_findings(request["policies"])
    json.dump(answer, sys.stdout)


if __name__ == "__main__":
    main()
