"""Exceptions. Codes are the contract shared with Go and JS; message text is not."""

from __future__ import annotations

from typing import Optional

__all__ = ["CompactError", "OptionError", "ErrBadBinary", "ErrABIMismatch", "ErrClosed"]


class CompactError(Exception):
    """An error envelope from the core: ``code`` is one of the stable error codes
    (``invalid_json``, ``invalid_request``, ``unknown_op``, ``invalid_messages``,
    ``invalid_config``, ``invalid_state``, ``input_too_large``, ``internal``) and
    ``path`` is a JSON pointer into the request (``""`` for the whole request)."""

    code: str
    path: str
    message: str

    def __init__(self, code: str, message: str, path: str = "") -> None:
        if not message.startswith("ctxcompact:"):
            message = "ctxcompact: " + message
        super().__init__(message)
        self.code = code
        self.path = path
        self.message = message

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, path={self.path!r}, message={self.message!r})"


class OptionError(CompactError, TypeError):
    """A bad argument caught by the binding before anything is sent: an unknown
    keyword option (the message names the closest valid one) or an option of the
    wrong type (``force="false"``, ``prompt_tokens="60000"``, ``47999.9``, ``True``
    where an integer goes). Always code ``invalid_request``, with ``path`` the
    option's wire name (``/force``, ``/prompt_tokens``). It is a ``CompactError``
    (the contract of every runtime) and a ``TypeError`` (what Python raises for a
    bad keyword or argument type), so either ``except`` catches it."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__("invalid_request", message, path)


class ErrBadBinary(Exception):
    """The WebAssembly module cannot be used: it does not compile, it does not match
    its recorded sha256, it imports something other than WASI preview1, or an export
    is missing or has the wrong signature."""

    def __init__(self, message: str, cause: Optional[BaseException] = None) -> None:
        if not message.startswith("ctxcompact:"):
            message = "ctxcompact: " + message
        super().__init__(message)
        self.__cause__ = cause


class ErrABIMismatch(Exception):
    """The module exports an ABI version this package does not speak."""

    def __init__(self, got: int, want: int) -> None:
        super().__init__(f"ctxcompact: module ABI version is {got}, this package speaks {want}")
        self.got = got
        self.want = want


class ErrClosed(Exception):
    """The Compactor (or engine) was closed; make a new one."""

    def __init__(self) -> None:
        super().__init__("ctxcompact: the Compactor is closed")
