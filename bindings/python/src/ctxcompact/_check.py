"""Argument checks done by the binding before anything is sent to the core.

No coercion: an option of the wrong type is an OptionError (a CompactError with code
invalid_request that is also a TypeError) whose path is the option's wire name. The
core checks ranges and everything inside messages and config; the binding only
checks what Python would otherwise convert silently or what JSON cannot hold.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Iterable, List, Optional, Tuple

from ._errors import CompactError, OptionError

#: How deeply arrays and objects may nest in a request (core.MaxNestingDepth).
MAX_NESTING = 1000


def _describe(v: Any) -> str:
    if isinstance(v, (str, bytes)):
        r = repr(v)
        return f"{type(v).__name__} {r[:40] + '...' if len(r) > 40 else r}"
    if isinstance(v, (bool, int, float)) or v is None:
        return f"{type(v).__name__} {v!r}"
    return type(v).__name__


def check_bool(name: str, v: Any) -> bool:
    """A bool option: True or False only ("false", 0 and 1 are refused)."""
    if v is True or v is False:
        return v
    raise OptionError(f"{name} must be True or False, not {_describe(v)}", "/" + name)


def check_int(name: str, v: Any) -> int:
    """An integer option: an int (or any integer type with __index__, e.g. a numpy
    integer), never a bool, a float (not even 48000.0) or a string. The range is the
    core's to check."""
    if v.__class__ is int:
        return v
    if isinstance(v, bool) or not hasattr(type(v), "__index__"):
        raise OptionError(f"{name} must be an integer, not {_describe(v)}", "/" + name)
    return int(v.__index__())


def check_opt_int(name: str, v: Any) -> Optional[int]:
    return None if v is None else check_int(name, v)


def check_str(name: str, v: Any) -> str:
    if isinstance(v, str):
        return v
    raise OptionError(f"{name} must be a string, not {_describe(v)}", "/" + name)


def check_opt_str(name: str, v: Any) -> Optional[str]:
    return None if v is None else check_str(name, v)


def check_timeout(name: str, v: Any) -> Optional[float]:
    """A timeout in seconds: a positive finite int or float, or None (no timeout)."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise OptionError(f"{name} must be a number of seconds or None, not {_describe(v)}", "/" + name)
    f = float(v)
    if not (f > 0 and math.isfinite(f)):
        raise OptionError(f"{name} must be a positive number of seconds, not {v!r}", "/" + name)
    return f


def check_callable(name: str, v: Any) -> Any:
    if v is None or callable(v):
        return v
    raise OptionError(f"{name} must be a function or None, not {_describe(v)}", "/" + name)


def closest(name: str, valid: Iterable[str]) -> Optional[str]:
    """The valid name closest to a misspelled one, or None when none is close:
    first ignoring case and underscores (promptTokens, PROMPT_TOKENS), then by
    difflib's similarity."""
    names = list(valid)
    squash = name.replace("_", "").replace("-", "").lower()
    for v in names:
        if v.replace("_", "").lower() == squash:
            return v
    import difflib  # only on the error path

    m = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    if not m:
        m = difflib.get_close_matches(squash, [v.replace("_", "") for v in names], n=1, cutoff=0.6)
        if m:
            return next(v for v in names if v.replace("_", "") == m[0])
    return m[0] if m else None


def reject_unknown(method: str, unknown: Dict[str, Any], valid: Iterable[str]) -> None:
    """Raise OptionError for the first unknown keyword option, naming the closest
    valid one. (Python would raise a plain TypeError; this one is also a
    CompactError with the contract's code and path.)"""
    if not unknown:
        return
    key = next(iter(unknown))
    names = list(valid)
    near = closest(key, names)
    hint = f"did you mean {near!r}?" if near else "valid options: " + ", ".join(names)
    raise OptionError(f"{method}() got an unknown option {key!r} ({hint})", "/" + key)


# --- values JSON cannot hold ------------------------------------------------------


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def find_unencodable(value: Any, root: str) -> Tuple[str, str]:
    """Where value cannot be written as JSON: (JSON pointer, what is wrong). Walks
    the value without recursion (it may nest 100,000 deep or refer to itself).

    - a NaN or infinite float, or an object json does not write (a set, bytes, a
      custom class): the pointer of that value;
    - a cycle: the pointer of the reference back to a container it is inside;
    - nesting deeper than the core accepts (MAX_NESTING below root): the pointer
      cut to its first two steps below root, e.g. ``/messages/0/content`` (a
      100,000-step pointer helps nobody), with the limit in the text.
    Returns (root, "") when nothing is found (the encoder failed for another
    reason)."""
    # Each stack entry: (value, path segments, depth); an exit marker pops the
    # container from the set of containers on the current path.
    on_path: Dict[int, bool] = {}
    stack: List[Tuple[Any, Any, int]] = [(value, (), 0)]
    exit_marker = object()
    while stack:
        v, segs, depth = stack.pop()
        if v is exit_marker:
            on_path.pop(segs, None)
            continue
        if v is None or isinstance(v, (str, bool, int)):
            continue
        if isinstance(v, float):
            if not math.isfinite(v):
                return _pointer(root, segs), f"{v!r} is not a JSON number"
            continue
        if isinstance(v, (dict, list, tuple)):
            if id(v) in on_path:
                return _pointer(root, segs), "refers to a value it is inside (a cycle)"
            if depth >= MAX_NESTING:
                return _pointer(root, segs[:2]), f"nests more than {MAX_NESTING} arrays and objects deep"
            on_path[id(v)] = True
            stack.append((exit_marker, id(v), 0))
            if isinstance(v, dict):
                items = list(v.items())
                for k, x in reversed(items):
                    if not isinstance(k, (str, int, float, bool)) and k is not None:
                        return _pointer(root, segs), f"has a key of type {type(k).__name__}"
                    stack.append((x, segs + (str(k),), depth + 1))
            else:
                for i in range(len(v) - 1, -1, -1):
                    stack.append((v[i], segs + (str(i),), depth + 1))
            continue
        return _pointer(root, segs), f"a {type(v).__name__} is not JSON"
    return root, ""


def _pointer(root: str, segs: Tuple[str, ...]) -> str:
    return root + "".join("/" + _escape(s) for s in segs)


def unencodable_error(code: str, what: str, value: Any, root: str, cause: BaseException) -> CompactError:
    """The CompactError for a value the JSON encoder refused, with the pointer of
    the offending part."""
    path, why = find_unencodable(value, root)
    if why:
        return CompactError(code, f"{what} cannot be written as JSON: {path} {why}", path)
    return CompactError(code, f"{what} cannot be written as JSON: {cause}", root)
