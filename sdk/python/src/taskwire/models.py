"""The client's values: results, tasks, agents and progress events, as dataclasses
converted from the API's messages (each keeps its message in ``raw``).

Statuses and states are the lowercase names of their enums without the prefix
(``TASK_STATUS_COMPLETED`` is ``"completed"``), as the CLI and the dashboard show them.
Times are timezone-aware UTC datetimes, None when unset.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Dict, List, NamedTuple, Optional, Tuple, Union

from google.protobuf import json_format, struct_pb2, timestamp_pb2
from google.protobuf.message import Message

from .v1 import envelope_pb2 as env
from .v1 import task_service_pb2 as api

__all__ = [
    "Usage",
    "ResultError",
    "ToolCallSummary",
    "Result",
    "Attempt",
    "WebhookDelivery",
    "Webhook",
    "TaskInfo",
    "PermissionRule",
    "Agent",
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
    "TASK_STATUSES",
    "status_name",
    "status_value",
]


# --- enums ---------------------------------------------------------------------------


def _enum_name(enum: Any, prefix: str, value: int) -> str:
    try:
        name: str = enum.Name(value)
    except ValueError:
        return "unknown"
    return name[len(prefix) :].lower() if name.startswith(prefix) else name.lower()


def status_name(value: int) -> str:
    """A wire TaskStatus as its lowercase name (``"completed"``)."""
    return _enum_name(env.TaskStatus, "TASK_STATUS_", value)


#: The task statuses' names, in the enum's order (``"unspecified"`` excluded).
TASK_STATUSES: Tuple[str, ...] = tuple(
    status_name(v) for v in env.TaskStatus.values() if v != 0
)


def status_value(status: Union[str, int]) -> int:
    """A status name (``"completed"``, any case, with or without the
    ``TASK_STATUS_`` prefix) or enum value as the wire's enum value."""
    if isinstance(status, int):
        return status
    name = status.strip().upper()
    if not name.startswith("TASK_STATUS_"):
        name = "TASK_STATUS_" + name
    try:
        return int(env.TaskStatus.Value(name))
    except ValueError:
        raise ValueError(
            f"unknown task status {status!r}; one of {', '.join(TASK_STATUSES)}"
        ) from None


def _tool_state(value: int) -> str:
    return _enum_name(env.ToolCallState, "TOOL_CALL_STATE_", value)


# --- helpers -------------------------------------------------------------------------


def _time(msg: Message, name: str) -> Optional[datetime]:
    if not msg.HasField(name):
        return None
    ts: timestamp_pb2.Timestamp = getattr(msg, name)
    return ts.ToDatetime(tzinfo=timezone.utc)


def _struct(msg: Message, name: str) -> Optional[Dict[str, Any]]:
    if not msg.HasField(name):
        return None
    value: struct_pb2.Struct = getattr(msg, name)
    return json_format.MessageToDict(value)


def _optional(msg: Message, name: str) -> Any:
    return getattr(msg, name) if msg.HasField(name) else None


# --- results -------------------------------------------------------------------------


@dataclass(frozen=True)
class Usage:
    """Tokens and cost of model calls. ``cost_usd`` is None when none of the calls was
    priced (never a made-up zero)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: Optional[float] = None
    unpriced_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_input_tokens: int = 0

    @classmethod
    def from_proto(cls, u: Optional[env.Usage]) -> "Usage":
        if u is None:
            return cls()
        return cls(
            input_tokens=u.input_tokens,
            output_tokens=u.output_tokens,
            cost_usd=u.cost_usd if u.HasField("cost_usd") else None,
            unpriced_tokens=u.unpriced_tokens,
            cached_input_tokens=u.cached_input_tokens,
            cache_write_input_tokens=u.cache_write_input_tokens,
        )


def _usage(msg: Message, name: str) -> Usage:
    return Usage.from_proto(getattr(msg, name) if msg.HasField(name) else None)


class ResultError(NamedTuple):
    """One error of a result: a ``(code, message)`` pair."""

    code: str
    message: str


@dataclass(frozen=True)
class ToolCallSummary:
    call_id: str
    tool: str
    title: str
    state: str


@dataclass(frozen=True)
class Result:
    """How a task ended: its status, answer (``text``, ``structured`` when it had an
    output schema), workspace changes (``patch``), errors and usage (``usage`` its
    subtree's, ``own_usage`` its own)."""

    task_id: str
    status: str
    text: str = ""
    structured: Optional[Dict[str, Any]] = None
    patch: str = ""
    errors: List[ResultError] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    own_usage: Usage = field(default_factory=Usage)
    session_id: str = ""
    worker: str = ""
    trace_id: str = ""
    attempt: int = 0
    title: str = ""
    latency_ms: int = 0
    steps: int = 0
    tool_calls: List[ToolCallSummary] = field(default_factory=list)
    raw: Optional[env.TaskResult] = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """The task completed."""
        return self.status == "completed"

    @classmethod
    def from_proto(cls, r: env.TaskResult) -> "Result":
        output = r.output if r.HasField("output") else None
        metrics = r.metrics if r.HasField("metrics") else None
        return cls(
            task_id=r.task_id,
            status=status_name(r.status),
            text=output.text if output is not None else "",
            structured=_struct(output, "structured") if output is not None else None,
            patch=r.patch,
            errors=[ResultError(e.code, e.message) for e in r.errors],
            usage=_usage(r, "usage"),
            own_usage=_usage(r, "own_usage"),
            session_id=r.session_id,
            worker=r.worker_id,
            trace_id=r.trace_id,
            attempt=r.attempt,
            title=r.title,
            latency_ms=metrics.latency_ms if metrics is not None else 0,
            steps=metrics.steps if metrics is not None else 0,
            tool_calls=[
                ToolCallSummary(c.call_id, c.tool, c.title, _tool_state(c.state))
                for c in r.tool_calls
            ],
            raw=r,
        )


# --- tasks ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Attempt:
    """One claim of a task by a worker, and how it ended."""

    attempt: int
    worker_id: str
    status: str
    error: str = ""
    retryable: bool = False
    started_at: Optional[datetime] = None
    finished_at: Optional[datetime] = None

    @classmethod
    def from_proto(cls, a: api.Attempt) -> "Attempt":
        return cls(
            attempt=a.attempt,
            worker_id=a.worker_id,
            status=status_name(a.status),
            error=a.error,
            retryable=a.retryable,
            started_at=_time(a, "started_at"),
            finished_at=_time(a, "finished_at"),
        )


@dataclass(frozen=True)
class WebhookDelivery:
    """One POST of a result webhook."""

    attempt: int
    started_at: Optional[datetime]
    status_code: int
    error: str
    duration_ms: int


@dataclass(frozen=True)
class Webhook:
    """A task's result webhook (``callback_url``) and its deliveries. ``state`` is
    ``"waiting"``, ``"pending"``, ``"delivered"`` or ``"failed"``."""

    url: str
    state: str
    attempts: int = 0
    next_attempt_at: Optional[datetime] = None
    delivered_at: Optional[datetime] = None
    deliveries: List[WebhookDelivery] = field(default_factory=list)
    raw: Any = field(default=None, repr=False, compare=False)

    @classmethod
    def from_proto(cls, w: Any) -> "Webhook":
        state_enum = getattr(api, "WebhookState", None)
        state = (
            _enum_name(state_enum, "WEBHOOK_STATE_", w.state)
            if state_enum is not None
            else str(w.state)
        )
        return cls(
            url=w.url,
            state=state,
            attempts=w.attempts,
            next_attempt_at=_time(w, "next_attempt_at"),
            delivered_at=_time(w, "delivered_at"),
            deliveries=[
                WebhookDelivery(
                    attempt=d.attempt,
                    started_at=_time(d, "started_at"),
                    status_code=d.status_code,
                    error=d.error,
                    duration_ms=d.duration_ms,
                )
                for d in w.deliveries
            ],
            raw=w,
        )


@dataclass(frozen=True)
class TaskInfo:
    """A task as ``get``, ``list`` and ``replay`` answer it. ``usage`` is the task's
    own model calls, ``subtree_usage`` with its descendants'; ``result`` is set once it
    finished; ``worker`` is the latest attempt's worker."""

    task_id: str
    parent_task_id: str
    trace_id: str
    tenant: str
    agent: str
    prompt: str
    title: str
    status: str
    attempt: int
    max_attempts: int = 0
    depth: int = 0
    priority: int = 0
    created_at: Optional[datetime] = None
    updated_at: Optional[datetime] = None
    deadline: Optional[datetime] = None
    not_before: Optional[datetime] = None
    usage: Usage = field(default_factory=Usage)
    subtree_usage: Usage = field(default_factory=Usage)
    max_cost_usd: Optional[float] = None
    max_tokens: Optional[int] = None
    wait: str = ""
    wait_until: Optional[datetime] = None
    result: Optional[Result] = None
    webhook: Optional[Webhook] = None
    attempts: List[Attempt] = field(default_factory=list)
    worker: str = ""
    raw: Optional[api.Task] = field(default=None, repr=False, compare=False)

    @property
    def finished(self) -> bool:
        """The task has a result (it will not run again unless replayed)."""
        return self.result is not None

    @classmethod
    def from_proto(cls, t: api.Task) -> "TaskInfo":
        has = t.DESCRIPTOR.fields_by_name
        webhook = (
            Webhook.from_proto(t.webhook)
            if "webhook" in has and t.HasField("webhook")
            else None
        )
        return cls(
            task_id=t.task_id,
            parent_task_id=t.parent_task_id,
            trace_id=t.trace_id,
            tenant=t.tenant,
            agent=t.agent,
            prompt=t.prompt,
            title=t.title,
            status=status_name(t.status),
            attempt=t.attempt,
            max_attempts=t.max_attempts,
            depth=t.depth,
            priority=t.priority,
            created_at=_time(t, "created_at"),
            updated_at=_time(t, "updated_at"),
            deadline=_time(t, "deadline"),
            not_before=_time(t, "not_before"),
            usage=_usage(t, "usage"),
            subtree_usage=_usage(t, "subtree_usage"),
            max_cost_usd=_optional(t, "max_cost_usd"),
            max_tokens=_optional(t, "max_tokens"),
            wait=t.wait,
            wait_until=_time(t, "wait_until"),
            result=Result.from_proto(t.result) if t.HasField("result") else None,
            webhook=webhook,
            attempts=[Attempt.from_proto(a) for a in t.attempts],
            worker=t.attempts[-1].worker_id if t.attempts else "",
            raw=t,
        )


# --- agents --------------------------------------------------------------------------


class PermissionRule(NamedTuple):
    """``action`` (``"allow"``, ``"ask"``, ``"deny"``) for calls of tool
    ``permission`` whose subject matches ``pattern``."""

    permission: str
    pattern: str
    action: str


@dataclass(frozen=True)
class Agent:
    """An agent tasks can be sent to. ``mode`` is ``"primary"``, ``"subagent"`` or
    ``"all"``."""

    name: str
    description: str
    mode: str
    hidden: bool = False
    model: Optional[str] = None
    tools: List[str] = field(default_factory=list)
    permission: List[PermissionRule] = field(default_factory=list)
    max_steps: int = 0
    color: Optional[str] = None
    raw: Optional[env.AgentSpec] = field(default=None, repr=False, compare=False)

    @classmethod
    def from_proto(cls, a: env.AgentSpec) -> "Agent":
        return cls(
            name=a.name,
            description=a.description,
            mode=_enum_name(env.AgentMode, "AGENT_MODE_", a.mode),
            hidden=a.hidden,
            model=_optional(a, "model"),
            tools=list(a.tools),
            permission=[
                PermissionRule(
                    r.permission,
                    r.pattern,
                    _enum_name(env.PermissionAction, "PERMISSION_ACTION_", r.action),
                )
                for r in a.permission
            ],
            max_steps=a.max_steps,
            color=_optional(a, "color"),
            raw=a,
        )


# --- events --------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """Something that happened in a watched task (or, for tool calls, approvals and
    children, in one of its descendants). ``task_id`` is the task it concerns;
    ``status`` is the watched task's status at that point; ``raw`` the
    ``TaskProgress`` it came in (None for a result)."""

    task_id: str
    status: str = ""
    attempt: int = 0
    seq: int = 0
    at: Optional[datetime] = None
    raw: Optional[env.TaskProgress] = field(default=None, repr=False, compare=False)


@dataclass(frozen=True)
class StepStarted(Event):
    step: int = 0


@dataclass(frozen=True)
class StepFinished(Event):
    step: int = 0
    usage: Usage = field(default_factory=Usage)


@dataclass(frozen=True)
class ToolCall(Event):
    """A tool call's state change (``state``: ``"pending"``, ``"running"``,
    ``"completed"``, ``"error"``). ``task_id`` is the task whose call it is (a
    descendant's for a call shown in its ancestors' progress); for a ``task`` call,
    ``child_task_id`` is the child it started, once known."""

    call_id: str = ""
    tool: str = ""
    state: str = ""
    title: str = ""
    error: str = ""
    child_task_id: str = ""
    metadata: Optional[Dict[str, Any]] = None


@dataclass(frozen=True)
class Text(Event):
    """A piece of the answer's text, as the model streams it."""

    text: str = ""


@dataclass(frozen=True)
class ChildTask(Event):
    """A child task was submitted: ``task_id`` is the child's, ``parent_task_id``
    the task that started it (through its call ``call_id``)."""

    agent: str = ""
    description: str = ""
    session_id: str = ""
    call_id: str = ""
    parent_task_id: str = ""


@dataclass(frozen=True)
class ApprovalRequired(Event):
    """A tool call waits for an answer: ``task_id`` is the task that asks (the
    watched one or a descendant); answer with ``approve(task_id, request_id, ...)``."""

    request_id: str = ""
    permission: str = ""
    patterns: List[str] = field(default_factory=list)


@dataclass(frozen=True)
class Compaction(Event):
    """The session's older turns were summarised to fit the model's context."""

    tokens_before: int = 0
    tokens_after: int = 0
    usage: Usage = field(default_factory=Usage)


@dataclass(frozen=True)
class RateLimitWait(Event):
    """The next model call waits ``wait_ms`` for a slot in ``model``'s rate budget."""

    model: str = ""
    wait_ms: int = 0


@dataclass(frozen=True)
class HookRun(Event):
    """A hook ran around the session (``hooks.json``, an agent's ``hooks``):
    ``outcome`` is ``ok``, ``blocked`` or ``failed``, ``message`` its reason or the
    context it added."""

    event: str = ""
    hook: str = ""
    source: str = ""
    subject: str = ""
    call_id: str = ""
    outcome: str = ""
    message: str = ""
    duration_ms: int = 0


@dataclass(frozen=True)
class ResultEvent(Event):
    """The task's result: the last event of a watch."""

    result: Optional[Result] = None


def _progress_event(
    p: env.TaskProgress, task_id: str, attempt: int
) -> Optional[Event]:
    common: Dict[str, Any] = dict(
        status=status_name(p.status),
        attempt=attempt,
        seq=p.seq,
        at=_time(p, "at"),
        raw=p,
    )
    kind = p.WhichOneof("event")
    if kind == "step_started":
        return StepStarted(task_id=task_id, step=p.step_started.step, **common)
    if kind == "step_finished":
        s = p.step_finished
        return StepFinished(
            task_id=task_id, step=s.step, usage=_usage(s, "usage"), **common
        )
    if kind == "tool_call":
        c = p.tool_call
        metadata = _struct(c, "metadata")
        child = ""
        if c.tool == "task" and metadata is not None:
            child = str(metadata.get("task_id") or "")
        return ToolCall(
            task_id=c.task_id or task_id,
            call_id=c.call_id,
            tool=c.tool,
            state=_tool_state(c.state),
            title=c.title,
            error=c.error,
            child_task_id=child,
            metadata=metadata,
            **common,
        )
    if kind == "text_delta":
        return Text(task_id=task_id, text=p.text_delta.text, **common)
    if kind == "child_task":
        started = p.child_task
        return ChildTask(
            task_id=started.task_id,
            agent=started.agent,
            description=started.description,
            session_id=started.session_id,
            call_id=started.call_id,
            parent_task_id=task_id,
            **common,
        )
    if kind == "approval_required":
        a = p.approval_required
        return ApprovalRequired(
            task_id=a.task_id or task_id,
            request_id=a.request_id,
            permission=a.permission,
            patterns=list(a.patterns),
            **common,
        )
    if kind == "compaction":
        compaction = p.compaction
        return Compaction(
            task_id=task_id,
            tokens_before=compaction.tokens_before,
            tokens_after=compaction.tokens_after,
            usage=_usage(compaction, "usage"),
            **common,
        )
    if kind == "rate_limit_wait":
        w = p.rate_limit_wait
        return RateLimitWait(task_id=task_id, model=w.model, wait_ms=w.wait_ms, **common)
    if kind == "hook":
        h = p.hook
        return HookRun(
            task_id=task_id,
            event=h.event,
            hook=h.hook,
            source=h.source,
            subject=h.subject,
            call_id=h.call_id,
            outcome=h.outcome,
            message=h.message,
            duration_ms=h.duration_ms,
            **common,
        )
    # Heartbeats, and kinds newer than this client: nothing to report.
    return None


def events_of_progress(p: env.TaskProgress) -> List[Event]:
    """A progress message's events: its own, then those that came with it
    (``following``, which take its task id and attempt)."""
    out: List[Event] = []
    for item in [p, *p.following]:
        event = _progress_event(item, item.task_id or p.task_id, item.attempt or p.attempt)
        if event is not None:
            out.append(event)
    return out


def events_of_watch(e: api.WatchEvent) -> List[Event]:
    """A Watch stream message's events."""
    kind = e.WhichOneof("event")
    if kind == "progress":
        return events_of_progress(e.progress)
    if kind == "result":
        result = Result.from_proto(e.result)
        return [
            ResultEvent(
                task_id=result.task_id,
                status=result.status,
                attempt=result.attempt,
                result=result,
            )
        ]
    return []
