"""The exceptions of the taskwire client: one per gRPC status code.

Every RPC's `grpc.RpcError` goes through :func:`from_rpc_error` (the one place that
maps them), and comes out as the :class:`TaskwireError` subclass of its code, with the
code's canonical name (``"NOT_FOUND"``) in ``code`` and the server's message in
``message``.
"""

from __future__ import annotations

import contextlib
from typing import Dict, Iterator, Optional, Type

import grpc

__all__ = [
    "TaskwireError",
    "Cancelled",
    "Unknown",
    "InvalidArgument",
    "DeadlineExceeded",
    "NotFound",
    "AlreadyExists",
    "PermissionDenied",
    "ResourceExhausted",
    "FailedPrecondition",
    "Aborted",
    "OutOfRange",
    "Unimplemented",
    "Internal",
    "Unavailable",
    "DataLoss",
    "Unauthenticated",
    "from_rpc_error",
    "error_for_code",
    "translated",
]


class TaskwireError(Exception):
    """A failed call: ``code`` is the gRPC code's name (``"NOT_FOUND"``), ``message``
    the server's explanation."""

    code: str
    message: str

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{self.code}: {self.message}" if self.message else self.code

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


class Cancelled(TaskwireError):
    """CANCELLED: the call was cancelled (usually by the caller)."""


class Unknown(TaskwireError):
    """UNKNOWN."""


class InvalidArgument(TaskwireError):
    """INVALID_ARGUMENT: the request is malformed or names something invalid."""


class DeadlineExceeded(TaskwireError):
    """DEADLINE_EXCEEDED: the call's deadline passed."""


class NotFound(TaskwireError):
    """NOT_FOUND: no such task, agent or command."""


class AlreadyExists(TaskwireError):
    """ALREADY_EXISTS."""


class PermissionDenied(TaskwireError):
    """PERMISSION_DENIED: the token may not do this."""


class ResourceExhausted(TaskwireError):
    """RESOURCE_EXHAUSTED: a limit (queue, tenant, size) was reached."""


class FailedPrecondition(TaskwireError):
    """FAILED_PRECONDITION: the task is not in a state that allows this."""


class Aborted(TaskwireError):
    """ABORTED."""


class OutOfRange(TaskwireError):
    """OUT_OF_RANGE."""


class Unimplemented(TaskwireError):
    """UNIMPLEMENTED: the server does not offer this call."""


class Internal(TaskwireError):
    """INTERNAL: the server failed."""


class Unavailable(TaskwireError):
    """UNAVAILABLE: the server cannot be reached or is shutting down."""


class DataLoss(TaskwireError):
    """DATA_LOSS."""


class Unauthenticated(TaskwireError):
    """UNAUTHENTICATED: no token, or a token the server does not know."""


_BY_CODE: Dict[str, Type[TaskwireError]] = {
    "CANCELLED": Cancelled,
    "UNKNOWN": Unknown,
    "INVALID_ARGUMENT": InvalidArgument,
    "DEADLINE_EXCEEDED": DeadlineExceeded,
    "NOT_FOUND": NotFound,
    "ALREADY_EXISTS": AlreadyExists,
    "PERMISSION_DENIED": PermissionDenied,
    "RESOURCE_EXHAUSTED": ResourceExhausted,
    "FAILED_PRECONDITION": FailedPrecondition,
    "ABORTED": Aborted,
    "OUT_OF_RANGE": OutOfRange,
    "UNIMPLEMENTED": Unimplemented,
    "INTERNAL": Internal,
    "UNAVAILABLE": Unavailable,
    "DATA_LOSS": DataLoss,
    "UNAUTHENTICATED": Unauthenticated,
}


def error_for_code(code: str, message: str) -> TaskwireError:
    """The exception of a gRPC code name (``"NOT_FOUND"``); unknown names give
    :class:`Unknown` with that code."""
    return _BY_CODE.get(code, Unknown)(code, message)


def from_rpc_error(error: grpc.RpcError) -> TaskwireError:
    """The exception for a failed call (sync or ``grpc.aio``)."""
    code_fn = getattr(error, "code", None)
    details_fn = getattr(error, "details", None)
    status: Optional[grpc.StatusCode] = code_fn() if callable(code_fn) else None
    message = details_fn() if callable(details_fn) else None
    name = status.name if status is not None else "UNKNOWN"
    return error_for_code(name, message or str(error))


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Runs a call's block, raising its `grpc.RpcError` as a :class:`TaskwireError`
    (``from None``: the gRPC error stays reachable as ``__context__``)."""
    try:
        yield
    except grpc.RpcError as e:
        raise from_rpc_error(e) from None
