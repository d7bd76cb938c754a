"""The asyncio client (``grpc.aio``): :class:`AsyncClient` and :class:`AsyncTask`,
the same methods as :class:`taskwire.Client` as coroutines and async iterators."""

from __future__ import annotations

from typing import Any, AsyncIterator, List, Optional, Union

import grpc
import grpc.aio

from . import _requests as req
from .client import DEFAULT_ADDR, TlsCa, make_channel_args
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

__all__ = ["AsyncClient", "AsyncTask"]


class AsyncTask:
    """A submitted task (see :class:`taskwire.Task`), with coroutine methods."""

    def __init__(
        self,
        client: "AsyncClient",
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
            f"AsyncTask(task_id={self.task_id!r}, trace_id={self.trace_id!r}, "
            f"created={self.created!r}, session_id={self.session_id!r})"
        )

    def events(self, timeout: Optional[float] = None) -> AsyncIterator[Event]:
        return self.client.watch(self.task_id, timeout=timeout)

    async def wait(self, timeout: Optional[float] = None) -> Result:
        return await self.client.wait(self.task_id, timeout=timeout)

    async def get(self) -> TaskInfo:
        return await self.client.get(self.task_id)

    async def cancel(self, reason: str = "") -> str:
        return await self.client.cancel(self.task_id, reason)


class AsyncClient:
    """The asyncio twin of :class:`taskwire.Client` (same arguments). Create it inside
    the event loop that uses it; ``async with AsyncClient(...) as client`` closes it."""

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
            self.channel = grpc.aio.insecure_channel(target, options=req.CHANNEL_OPTIONS)
        else:
            self.channel = grpc.aio.secure_channel(target, creds, options=req.CHANNEL_OPTIONS)
        self.addr = addr
        stub_type: Any = api_grpc.TaskServiceStub
        self.stub = stub_type(self.channel)
        self.metadata = req.auth_metadata(token)
        self.timeout = timeout

    async def close(self) -> None:
        await self.channel.close(None)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # --- the calls (every RPC goes through these two) ---

    async def _unary(self, method: str, request: Any, timeout: Optional[float] = None) -> Any:
        with translated():
            return await getattr(self.stub, method)(
                request,
                metadata=self.metadata,
                timeout=timeout if timeout is not None else self.timeout,
            )

    async def _stream(
        self, method: str, request: Any, timeout: Optional[float]
    ) -> AsyncIterator[Any]:
        call = getattr(self.stub, method)(request, metadata=self.metadata, timeout=timeout)
        try:
            with translated():
                async for item in call:
                    yield item
        finally:
            call.cancel()

    # --- tasks ---

    async def submit(self, agent: str, prompt: str, **options: Any) -> AsyncTask:
        """See :meth:`taskwire.Client.submit`."""
        request = req.submit_request(agent, prompt, options)
        return self._task(await self._unary("Submit", request))

    async def run_command(self, name: str, args: str = "", **options: Any) -> AsyncTask:
        """See :meth:`taskwire.Client.run_command`."""
        request = req.run_command_request(name, args, options)
        return self._task(await self._unary("RunCommand", request))

    def task(self, task_id: str) -> AsyncTask:
        return AsyncTask(self, task_id)

    async def get(self, task_id: str) -> TaskInfo:
        return TaskInfo.from_proto(await self._unary("Get", api.GetRequest(task_id=task_id)))

    async def list(
        self,
        trace_id: Optional[str] = None,
        parent_task_id: Optional[str] = None,
        status: Optional[Union[str, int]] = None,
        agent: Optional[str] = None,
        limit: Optional[int] = None,
        tenant: Optional[str] = None,
    ) -> List[TaskInfo]:
        request = req.list_request(trace_id, parent_task_id, status, agent, limit, tenant)
        response = await self._unary("List", request)
        return [TaskInfo.from_proto(t) for t in response.tasks]

    async def cancel(self, task_id: str, reason: str = "") -> str:
        request = api.CancelRequest(task_id=task_id, reason=reason)
        return status_name((await self._unary("Cancel", request)).status)

    async def approve(
        self,
        task_id: str,
        request_id: str,
        answer: Union[str, int],
        message: Optional[str] = None,
    ) -> str:
        request = req.approve_request(task_id, request_id, answer, message)
        return status_name((await self._unary("Approve", request)).status)

    async def replay(self, task_id: str) -> TaskInfo:
        request = api.ReplayRequest(task_id=task_id)
        return TaskInfo.from_proto(await self._unary("Replay", request))

    async def agents(self, include_hidden: bool = False) -> List[Agent]:
        request = api.ListAgentsRequest(include_hidden=include_hidden)
        response = await self._unary("ListAgents", request)
        return [Agent.from_proto(a) for a in response.agents]

    # --- watching ---

    async def watch(self, task_id: str, timeout: Optional[float] = None) -> AsyncIterator[Event]:
        stream = self._stream("Watch", api.WatchRequest(task_id=task_id), timeout)
        try:
            async for message in stream:
                for event in events_of_watch(message):
                    yield event
                    if isinstance(event, ResultEvent):
                        return
        finally:
            await stream.aclose()  # type: ignore[attr-defined]

    async def wait(self, task_id: str, timeout: Optional[float] = None) -> Result:
        events = self.watch(task_id, timeout=timeout)
        try:
            async for event in events:
                if isinstance(event, ResultEvent) and event.result is not None:
                    return event.result
        except DeadlineExceeded as e:
            if timeout is None:
                raise
            raise TimeoutError(f"task {task_id} did not finish within {timeout} s") from e
        finally:
            await events.aclose()  # type: ignore[attr-defined]
        info = await self.get(task_id)
        if info.result is not None:
            return info.result
        raise Unavailable("UNAVAILABLE", f"the watch of task {task_id} ended before its result")

    def _task(self, r: api.SubmitResponse) -> AsyncTask:
        return AsyncTask(self, r.task_id, r.trace_id, r.created, r.session_id, raw=r)
