"""taskwire: the Python client of taskwire's gRPC API.

    from taskwire import Client

    with Client("http://127.0.0.1:50051") as client:
        result = client.submit("general", "hello").wait(timeout=60)
        print(result.status, result.text)

:class:`Client` blocks; :class:`AsyncClient` has the same methods as coroutines. Failed
calls raise a :class:`TaskwireError` subclass per gRPC code (:class:`NotFound`, ...).
The generated modules are ``taskwire.v1.task_service_pb2`` and friends.
"""

from .aio import AsyncClient, AsyncTask
from .client import DEFAULT_ADDR, Client, Task
from .errors import (
    Aborted,
    AlreadyExists,
    Cancelled,
    DataLoss,
    DeadlineExceeded,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    NotFound,
    OutOfRange,
    PermissionDenied,
    ResourceExhausted,
    TaskwireError,
    Unauthenticated,
    Unavailable,
    Unimplemented,
    Unknown,
)
from .models import (
    TASK_STATUSES,
    Agent,
    ApprovalRequired,
    Attempt,
    ChildTask,
    Compaction,
    Event,
    PermissionRule,
    RateLimitWait,
    HookRun,
    Result,
    ResultError,
    ResultEvent,
    StepFinished,
    StepStarted,
    TaskInfo,
    Text,
    ToolCall,
    ToolCallSummary,
    Usage,
    Webhook,
    WebhookDelivery,
)

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_ADDR",
    "Client",
    "Task",
    "AsyncClient",
    "AsyncTask",
    # values
    "Result",
    "ResultError",
    "Usage",
    "ToolCallSummary",
    "TaskInfo",
    "Attempt",
    "Webhook",
    "WebhookDelivery",
    "Agent",
    "PermissionRule",
    "TASK_STATUSES",
    # events
    "Event",
    "StepStarted",
    "StepFinished",
    "ToolCall",
    "Text",
    "ChildTask",
    "ApprovalRequired",
    "Compaction",
    "RateLimitWait",
    "HookRun",
    "ResultEvent",
    # errors
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
]
