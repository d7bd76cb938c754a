"""The blocking client: :class:`Client` and its task handle :class:`Task`."""

from __future__ import annotations

import os
from typing import Any, Iterator, List, Optional, Tuple, Union

import grpc

from . import _requests as req
from .errors import DeadlineExceeded, Unavailable, translated
from .models import (
    Agent,
    Event,
    Result,
    ResultEvent,
    TaskInfo,
    events_of_watch,
    status_name,
)
from .v1 import task_service_pb2 as api
from .v1 import task_service_pb2_grpc as api_grpc

__all__ = ["Client", "Task", "DEFAULT_ADDR"]

#: The coordinator's gRPC address when none is given.
DEFAULT_ADDR = "http://127.0.0.1:50051"

TlsCa = Union[str, bytes, "os.PathLike[str]", None]


def make_channel_args(addr: str, tls_ca: TlsCa) -> Tuple[str, Optional[grpc.ChannelCredentials]]:
    """The target and, for TLS, the credentials of a channel to `addr`."""
    target, tls = req.parse_addr(addr)
    if tls_ca is not None and not tls:
        if "://" in addr:
            raise ValueError(f"tls_ca given for a plaintext address {addr!r}: use https://")
        tls = True
    if not tls:
        return target, None
    return target, grpc.ssl_channel_credentials(root_certificates=req.read_ca(tls_ca))


class Task:
    """A submitted task: its ids, and what can be done with it (``wait``,
    ``events``, ``get``, ``cancel``). ``created`` is False when an idempotency key
    matched an existing task."""

    def __init__(
        self,
        client: "Client",
        task_id: str,
        trace_id: str = "",
        created: bool = False,
        session_id: str = "",
        raw: Optional[api.SubmitResponse] = None,
    ) -> None:
        self.client = client
        self.task_id = task_id
        self.trace_id = trace_id
        self.created = created
        self.session_id = session_id
        self.raw = raw

    def __repr__(self) -> str:
        return (
            f"Task(task_id={self.task_id!r}, trace_id={self.trace_id!r}, "
            f"created={self.created!r}, session_id={self.session_id!r})"
        )

    def events(self, timeout: Optional[float] = None) -> Iterator[Event]:
        """The task's events from its start (its descendants' tool calls, children and
        approvals included), ending with its :class:`ResultEvent`."""
        return self.client.watch(self.task_id, timeout=timeout)

    def wait(self, timeout: Optional[float] = None) -> Result:
        """Blocks until the task finished; its result. Raises ``TimeoutError`` when
        `timeout` seconds pass first."""
        return self.client.wait(self.task_id, timeout=timeout)

    def get(self) -> TaskInfo:
        return self.client.get(self.task_id)

    def cancel(self, reason: str = "") -> str:
        """Cancels the task; its status afterwards."""
        return self.client.cancel(self.task_id, reason)


class Client:
    """A connection to a taskwire coordinator's gRPC API.

    `addr`: ``http://host:port`` (plaintext) or ``https://host:port`` (TLS, checked
    against `tls_ca` -- a PEM file's path or PEM bytes -- or the system's roots).
    `token`: sent as ``authorization: Bearer <token>`` on every call. `timeout`: the
    default deadline in seconds of the unary calls (None: none).

    The generated stub is ``client.stub`` (``taskwire.v1.task_service_pb2_grpc``) for
    anything this layer does not cover; pass ``client.metadata`` to its calls.
    """

    def __init__(
        self,
        addr: str = DEFAULT_ADDR,
        token: Optional[str] = None,
        tls_ca: TlsCa = None,
        *,
        timeout: Optional[float] = None,
    ) -> None:
        target, creds = make_channel_args(addr, tls_ca)
        if creds is None:
            self.channel = grpc.insecure_channel(target, options=req.CHANNEL_OPTIONS)
        else:
            self.channel = grpc.secure_channel(target, creds, options=req.CHANNEL_OPTIONS)
        self.addr = addr
        stub_type: Any = api_grpc.TaskServiceStub
        self.stub = stub_type(self.channel)
        self.metadata = req.auth_metadata(token)
        self.timeout = timeout

    # --- lifecycle ---

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # --- the calls (every RPC goes through these two) ---

    def _unary(self, method: str, request: Any, timeout: Optional[float] = None) -> Any:
        with translated():
            return getattr(self.stub, method)(
                request,
                metadata=self.metadata,
                timeout=timeout if timeout is not None else self.timeout,
            )

    def _stream(self, method: str, request: Any, timeout: Optional[float]) -> Iterator[Any]:
        call = getattr(self.stub, method)(request, metadata=self.metadata, timeout=timeout)
        try:
            with translated():
                for item in call:
                    yield item
        finally:
            call.cancel()

    # --- tasks ---

    def submit(self, agent: str, prompt: str, **options: Any) -> Task:
        """Submits `prompt` to `agent`. Every other SubmitRequest field is a keyword
        option of the same name: ``input`` (dict), ``deadline`` (aware datetime or
        timedelta from now), ``output_schema`` (dict or JSON text), ``idempotency_key``,
        ``parent_task_id``, ``resume_token``, ``priority``, ``model``, ``max_steps``,
        ``max_attempts``, ``max_cost_usd``, ``max_tokens``, ``trace_id``, ``tenant``,
        ``sender``, ``intent``, ``auth_scope``, ``context_refs`` / ``attachments``
        (messages or dicts), ``workspace_patch``, ``callback_url``, ``command``, ...
        An option that names no field raises TypeError."""
        request = req.submit_request(agent, prompt, options)
        return self._task(self._unary("Submit", request))

    def run_command(self, name: str, args: str = "", **options: Any) -> Task:
        """Runs slash command `name` (with or without its ``/``) with `args`; the other
        RunCommandRequest fields (``tenant``, ``parent_task_id``, ``session_id``,
        ``model``, ``deadline``, ``idempotency_key``, ``output_schema``) are keyword
        options."""
        request = req.run_command_request(name, args, options)
        return self._task(self._unary("RunCommand", request))

    def task(self, task_id: str) -> Task:
        """A handle on an existing task (a child, an asking descendant...)."""
        return Task(self, task_id)

    def get(self, task_id: str) -> TaskInfo:
        return TaskInfo.from_proto(self._unary("Get", api.GetRequest(task_id=task_id)))

    def list(
        self,
        trace_id: Optional[str] = None,
        parent_task_id: Optional[str] = None,
        status: Optional[Union[str, int]] = None,
        agent: Optional[str] = None,
        limit: Optional[int] = None,
        tenant: Optional[str] = None,
    ) -> List[TaskInfo]:
        """Tasks, newest first, filtered by every argument given (``status`` as a name
        such as ``"completed"``); at most `limit` (server default 50, at most 1000)."""
        request = req.list_request(trace_id, parent_task_id, status, agent, limit, tenant)
        response = self._unary("List", request)
        return [TaskInfo.from_proto(t) for t in response.tasks]

    def cancel(self, task_id: str, reason: str = "") -> str:
        """Cancels a task; its status afterwards (``"cancelled"``, or the status it had
        already finished with)."""
        response = self._unary("Cancel", api.CancelRequest(task_id=task_id, reason=reason))
        return status_name(response.status)

    def approve(
        self,
        task_id: str,
        request_id: str,
        answer: Union[str, int],
        message: Optional[str] = None,
    ) -> str:
        """Answers an ``approval_required`` of task `task_id` (the task that asks):
        ``"once"``, ``"always"`` or ``"reject"`` (`message` goes back to the model).
        Returns the task's status."""
        request = req.approve_request(task_id, request_id, answer, message)
        return status_name(self._unary("Approve", request).status)

    def replay(self, task_id: str) -> TaskInfo:
        """Runs a dead-lettered (or failed) task again."""
        return TaskInfo.from_proto(self._unary("Replay", api.ReplayRequest(task_id=task_id)))

    def agents(self, include_hidden: bool = False) -> List[Agent]:
        response = self._unary("ListAgents", api.ListAgentsRequest(include_hidden=include_hidden))
        return [Agent.from_proto(a) for a in response.agents]

    # --- watching ---

    def watch(self, task_id: str, timeout: Optional[float] = None) -> Iterator[Event]:
        """A task's events from its start, ending with its :class:`ResultEvent`.
        `timeout`: seconds for the whole stream (then DeadlineExceeded)."""
        for message in self._stream("Watch", api.WatchRequest(task_id=task_id), timeout):
            for event in events_of_watch(message):
                yield event
                if isinstance(event, ResultEvent):
                    return

    def wait(self, task_id: str, timeout: Optional[float] = None) -> Result:
        """Blocks until task `task_id` finished; its result. Raises ``TimeoutError``
        when `timeout` seconds pass first."""
        try:
            for event in self.watch(task_id, timeout=timeout):
                if isinstance(event, ResultEvent) and event.result is not None:
                    return event.result
        except DeadlineExceeded as e:
            if timeout is None:
                raise
            raise TimeoutError(f"task {task_id} did not finish within {timeout} s") from e
        info = self.get(task_id)
        if info.result is not None:
            return info.result
        raise Unavailable("UNAVAILABLE", f"the watch of task {task_id} ended before its result")

    def _task(self, r: api.SubmitResponse) -> Task:
        return Task(self, r.task_id, r.trace_id, r.created, r.session_id, raw=r)
