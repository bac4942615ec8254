"""Props checked against their type hints at the call, as jsii checks aws-cdk-lib's: a prop of the
wrong type is one TypeError naming every such prop, what it expects and what was given
(`max_runtime: expected Duration (e.g. Duration.hours(2)), got int 7200`), not an AttributeError
deep inside the construct or one error per character of a string given for a list.

`@typed_props` decorates a constructor or a static factory; `@typed_fields` an options dataclass.
The expected types are the signature's own hints (`typing.get_type_hints`): `X | None`, `list[X]`,
`Sequence[X]`, `Mapping[K, V]`, `Literal[…]`, classes, and CDK interfaces (`kms.IKey`, `iam.IRole`:
a jsii interface is a Protocol, checked by the members it declares, as duck typing would). Tokens
pass where their type does (a string token is a str; a number token is a float, accepted for an int).
A hint that cannot be resolved at run time is not checked."""

from __future__ import annotations

import collections.abc
import functools
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from aws_cdk import Duration, Size, Token

from sagestack.core.catalog.suggest import closest

F = TypeVar("F", bound=Callable[..., Any])
C = TypeVar("C", bound=type)

# How a value of these types is written, shown beside the expected type.
_EXAMPLES: dict[type, str] = {
    Duration: "Duration (e.g. Duration.hours(2))",
    Size: "Size (e.g. Size.gibibytes(30))",
}
# What a list prop holds, in words, where its name says more than `str` does.
_ITEMS: dict[str, str] = {"instance_types": "instance types"}
_NOT_CHECKED = {"self", "scope", "id"}


def _args(hint: Any) -> tuple[Any, ...]:
    return typing.get_args(hint)


def _is_protocol(hint: Any) -> bool:
    return isinstance(hint, type) and getattr(hint, "_is_protocol", False)


@functools.cache
def _protocol_members(hint: type) -> frozenset[str]:
    """The public members a Protocol (a jsii interface) and its Protocol bases declare (a class
    does not change: worked out once per interface, not once per prop of every construct)."""
    members: set[str] = set()
    for base in hint.__mro__:
        if base in (object, typing.Protocol, typing.Generic) or not _is_protocol(base):
            continue
        members |= {name for name in vars(base) if not name.startswith("_")}
    return frozenset(members)


def matches(value: Any, hint: Any) -> bool:
    """Whether `value` is of the type `hint` describes (element by element for containers)."""
    origin = typing.get_origin(hint)
    if hint is Any or hint is object or isinstance(hint, TypeVar):
        return True
    if hint is None or hint is type(None):
        return value is None
    if origin in (typing.Union, types.UnionType):
        return any(matches(value, arm) for arm in _args(hint))
    if origin is typing.Literal:
        return value in _args(hint)
    if origin in (list, tuple, collections.abc.Sequence, collections.abc.Iterable, set, frozenset):
        return _matches_items(value, hint, origin)
    if origin in (dict, collections.abc.Mapping, collections.abc.MutableMapping):
        if not isinstance(value, Mapping):
            return False
        key, item = _args(hint) or (Any, Any)
        return all(matches(k, key) and matches(v, item) for k, v in value.items())
    if origin is collections.abc.Callable or hint is collections.abc.Callable:
        return callable(value)
    if origin is not None:  # another generic (type[…] …): its origin class only
        return isinstance(value, origin) if isinstance(origin, type) else True
    return _matches_class(value, hint)


def _matches_items(value: Any, hint: Any, origin: Any) -> bool:
    # a list where a tuple is hinted is fine (jsii's arrays are lists)
    container = origin if origin in (set, frozenset) else (list, tuple)
    if isinstance(value, str | bytes) or not isinstance(value, container):
        return False
    args = _args(hint)
    if origin is tuple and args and args[-1] is not Ellipsis:
        return len(value) == len(args) and all(matches(v, a) for v, a in zip(value, args, strict=True))
    return not args or all(matches(v, args[0]) for v in value)


def _matches_class(value: Any, hint: Any) -> bool:
    if not isinstance(hint, type):
        return True  # a hint this checker does not know: left to the construct
    if hint is int:
        return (isinstance(value, int) and not isinstance(value, bool)) or _number_token(value)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if _is_protocol(hint):
        return isinstance(value, hint) if _runtime(hint) else _has_members(value, hint)
    return isinstance(value, hint)


def _number_token(value: Any) -> bool:
    return isinstance(value, float) and Token.is_unresolved(value)


def _runtime(hint: type) -> bool:
    return bool(getattr(hint, "_is_runtime_protocol", False))


def _has_members(value: Any, hint: type) -> bool:
    # the class first (an instance's properties are calls into jsii); then members set in __init__
    kind: Any = type(value)  # a class is hashable; mypy's `type[Any]` is not known to be
    return all(hasattr(value, name) for name in _missing_on_class(kind, hint))


@functools.cache
def _missing_on_class(kind: type, hint: type) -> tuple[str, ...]:
    """The members of `hint` that class `kind` does not declare (once per class and interface)."""
    return tuple(sorted(name for name in _protocol_members(hint) if not hasattr(kind, name)))


def describe(hint: Any, items: str | None = None) -> str:
    """The expected type in words: `Duration (e.g. Duration.hours(2))`, `a list of str`, `kms.IKey`."""
    origin = typing.get_origin(hint)
    if hint is None or hint is type(None):
        return "None"
    if origin in (typing.Union, types.UnionType):
        arms = [describe(arm, items) for arm in _args(hint) if arm is not type(None)]
        return " or ".join(arms)
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(v) for v in _args(hint))
    if origin in (list, tuple, collections.abc.Sequence, collections.abc.Iterable, set, frozenset):
        args = _args(hint)
        return f"a list of {items or (describe(args[0]) if args else 'values')}"
    if origin in (dict, collections.abc.Mapping, collections.abc.MutableMapping):
        key, item = _args(hint) or (Any, Any)
        return f"a mapping of {describe(key)} to {describe(item)}"
    if origin is collections.abc.Callable or hint is collections.abc.Callable:
        return "a callable"
    if hint is Any:
        return "any value"
    return _class_name(hint) if isinstance(hint, type) else str(hint)


def _class_name(hint: type) -> str:
    if hint in _EXAMPLES:
        return _EXAMPLES[hint]
    module = hint.__module__
    if module.startswith("aws_cdk.aws_"):  # as a CDK app imports it: aws_kms as kms
        return f"{module.split('.')[1].removeprefix('aws_')}.{hint.__name__}"
    return hint.__name__


def given(value: Any) -> str:
    """What was given, as a message shows it: `int 7200`, `the string 'ml.m5.xlarge'`."""
    if isinstance(value, str):
        return f"the string {value!r}"
    if value is None:
        return "None"
    text = repr(value) if type(value).__module__ == "builtins" else ""
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}".rstrip()


def problem(name: str, value: Any, hint: Any) -> str | None:
    """`name: expected …, got …` when value is not of the hint's type; None when it is."""
    if matches(value, hint):
        return None
    text = f"{name}: expected {describe(hint, _ITEMS.get(name))}, got {given(value)}"
    if isinstance(value, str) and matches([value], hint):
        text += f" (did you mean [{value!r}]?)"
    return text


def problems_of(values: Mapping[str, Any], hints: Mapping[str, Any]) -> list[str]:
    """Every prop of `values` whose hint it does not match, in the order given."""
    found: list[str] = []
    for name, value in values.items():
        hint = hints.get(name)
        if name in _NOT_CHECKED or hint is None:
            continue
        if typing.get_origin(hint) is typing.Unpack:  # **props: Unpack[SomeTypedDict]
            fields = _hints_of(_args(hint)[0])
            found += [p for key, v in value.items() if (p := _one(key, v, fields)) is not None]
            continue
        if (p := _one(name, value, hints)) is not None:
            found.append(p)
    return found


def _one(name: str, value: Any, hints: Mapping[str, Any]) -> str | None:
    return problem(name, value, hints[name]) if name in hints else None


def raise_problems(owner: str, problems: list[str]) -> None:
    if problems:
        raise TypeError(f"{owner}: " + "; ".join(problems))


@functools.cache
def _hints_of(target: Any) -> dict[str, Any]:
    """The resolved hints of a function or class, each on its own: a hint naming what is imported
    only for type checkers is left out (not checked) rather than failing the others."""
    raw: dict[str, Any] = {}
    for klass in reversed(getattr(target, "__mro__", (target,))):
        raw.update(getattr(klass, "__annotations__", {}))
    module = inspect.getmodule(target)
    namespace = vars(module) if module else {}
    hints: dict[str, Any] = {}
    for name, annotation in raw.items():
        holder = types.SimpleNamespace(__annotations__={name: annotation}, __globals__=namespace)
        try:
            hints[name] = typing.get_type_hints(holder, globalns=namespace, include_extras=False)[name]
        except (NameError, AttributeError, TypeError, SyntaxError):
            continue
    return hints


def _owner(fn: Callable[..., Any], arguments: Mapping[str, Any]) -> str:
    if "self" in arguments and "id" in arguments:  # a construct: as CDK names it, with its id
        return f"{type(arguments['self']).__name__} {arguments['id']!r}"
    return fn.__qualname__.removesuffix(".__init__")


def _flat(
    signature: inspect.Signature, bound: inspect.BoundArguments, hints: Mapping[str, Any]
) -> dict[str, Any]:
    """The arguments by name, `**kwargs: X` opened into its own names (each against X)."""
    values: dict[str, Any] = {}
    for name, value in bound.arguments.items():
        kind = signature.parameters[name].kind
        unpacked = typing.get_origin(hints.get(name)) is typing.Unpack
        if kind is inspect.Parameter.VAR_KEYWORD and not unpacked:
            values.update(value)
        elif kind is not inspect.Parameter.VAR_POSITIONAL:
            values[name] = value
    return values


def _bound(
    signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any], hints: Mapping[str, Any]
) -> tuple[inspect.BoundArguments, list[str]] | None:
    """The arguments bound to the signature, and what Python would refuse one at a time, in the
    checker's words: an unknown prop (with the nearest name), a required prop not given."""
    params = signature.parameters
    open_kwargs = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    unknown = [] if open_kwargs else [k for k in kwargs if k not in params]
    props = [n for n in params if n not in _NOT_CHECKED]
    problems = [f"unknown prop '{k}'{_nearest(k, props)}" for k in unknown]
    try:
        bound = signature.bind_partial(*args, **{k: v for k, v in kwargs.items() if k not in unknown})
    except TypeError:
        return None  # too many positional arguments: Python's own message says so
    for name, param in params.items():
        required = param.default is inspect.Parameter.empty and param.kind not in _VARIADIC
        if required and name not in bound.arguments:
            expected = f", expected {describe(hints[name], _ITEMS.get(name))}" if name in hints else ""
            problems.append(f"{name}: required{expected}")
    return bound, problems


_VARIADIC = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def _nearest(given: str, props: list[str]) -> str:
    hits = closest(given, props)
    return f" (did you mean '{hits[0]}'?)" if hits else ""


def _checked(fn: F, hints_of: Any, owner: Callable[[Mapping[str, Any]], str]) -> F:
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def checked(*args: Any, **kwargs: Any) -> Any:
        hints = _hints_of(hints_of)
        binding = _bound(signature, args, kwargs, hints)
        if binding is None:
            return fn(*args, **kwargs)
        bound, problems = binding
        values = _flat(signature, bound, hints)
        raise_problems(owner(values), problems + problems_of(values, hints))
        return fn(*args, **kwargs)

    return typing.cast(F, checked)


def typed_props(fn: F) -> F:
    """Check every argument of a constructor or static factory against its hint at the call
    (before the constructor runs: the first error is the prop's type, not what it led to)."""
    return _checked(fn, fn, lambda values: _owner(fn, values))


def typed_fields(cls: C) -> C:
    """Check an options dataclass's fields against their hints when it is made."""
    cls.__init__ = _checked(cls.__init__, cls, lambda values: cls.__name__)  # type: ignore[misc]
    return cls
