"""What needs no server: message conversions, request building, error mapping."""

from __future__ import annotations

import unittest
from datetime import datetime, timedelta, timezone

import grpc
from google.protobuf import timestamp_pb2

from taskwire import (
    ApprovalRequired,
    ChildTask,
    Client,
    InvalidArgument,
    NotFound,
    ResultEvent,
    StepStarted,
    TaskInfo,
    TaskwireError,
    Text,
    ToolCall,
    Unauthenticated,
    Unavailable,
    Unknown,
)
from taskwire import _requests as req
from taskwire.errors import from_rpc_error
from taskwire.models import events_of_watch, status_name, status_value
from taskwire.v1 import envelope_pb2 as env
from taskwire.v1 import task_service_pb2 as api


class FakeRpcError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code = code
        self._details = details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


class ErrorsTest(unittest.TestCase):
    def test_each_code_maps_to_its_class(self) -> None:
        e = from_rpc_error(FakeRpcError(grpc.StatusCode.NOT_FOUND, "task x"))
        self.assertIsInstance(e, NotFound)
        self.assertEqual((e.code, e.message), ("NOT_FOUND", "task x"))
        self.assertEqual(str(e), "NOT_FOUND: task x")
        for code, cls in [
            (grpc.StatusCode.INVALID_ARGUMENT, InvalidArgument),
            (grpc.StatusCode.UNAUTHENTICATED, Unauthenticated),
            (grpc.StatusCode.UNAVAILABLE, Unavailable),
            (grpc.StatusCode.UNKNOWN, Unknown),
        ]:
            err = from_rpc_error(FakeRpcError(code, "m"))
            self.assertIs(type(err), cls)
            self.assertIsInstance(err, TaskwireError)
            self.assertEqual(err.code, code.name)

    def test_an_unreachable_server_raises_unavailable(self) -> None:
        with Client("http://127.0.0.1:1", timeout=5) as client:
            with self.assertRaises(Unavailable):
                client.agents()


class ConversionTest(unittest.TestCase):
    def test_statuses(self) -> None:
        self.assertEqual(status_name(env.TASK_STATUS_COMPLETED), "completed")
        self.assertEqual(status_name(env.TASK_STATUS_AWAITING_APPROVAL), "awaiting_approval")
        self.assertEqual(status_name(999), "unknown")
        self.assertEqual(status_value("dead_lettered"), env.TASK_STATUS_DEAD_LETTERED)
        with self.assertRaises(ValueError):
            status_value("sleeping")

    def test_a_progress_message_and_its_following_events(self) -> None:
        p = env.TaskProgress(task_id="root", attempt=1, seq=1, status=env.TASK_STATUS_RUNNING)
        p.step_started.step = 1
        f = p.following.add(seq=2, status=env.TASK_STATUS_RUNNING)
        f.text_delta.text = "hi"
        g = p.following.add(seq=3)
        g.approval_required.request_id = "r1"
        g.approval_required.permission = "bash"
        g.approval_required.patterns.append("echo *")
        h = p.following.add(seq=4)
        h.approval_required.request_id = "r2"
        h.approval_required.task_id = "child"
        c = p.following.add(seq=5)
        c.child_task.task_id = "child"
        c.child_task.agent = "asker"
        t = p.following.add(seq=6)
        t.tool_call.call_id = "c1"
        t.tool_call.tool = "task"
        t.tool_call.state = env.TOOL_CALL_STATE_RUNNING
        t.tool_call.metadata.update({"task_id": "child"})
        p.following.add(seq=7).heartbeat.SetInParent()
        events = events_of_watch(api.WatchEvent(progress=p))
        self.assertEqual([e.seq for e in events], [1, 2, 3, 4, 5, 6])
        self.assertIsInstance(events[0], StepStarted)
        self.assertEqual(events[0].status, "running")
        text = events[1]
        assert isinstance(text, Text)
        self.assertEqual((text.task_id, text.attempt, text.text), ("root", 1, "hi"))
        own, child = events[2], events[3]
        assert isinstance(own, ApprovalRequired) and isinstance(child, ApprovalRequired)
        self.assertEqual((own.task_id, own.patterns), ("root", ["echo *"]))
        self.assertEqual(child.task_id, "child")
        started = events[4]
        assert isinstance(started, ChildTask)
        self.assertEqual((started.task_id, started.parent_task_id), ("child", "root"))
        call = events[5]
        assert isinstance(call, ToolCall)
        self.assertEqual((call.task_id, call.state, call.child_task_id), ("root", "running", "child"))

    def test_a_result_event(self) -> None:
        r = env.TaskResult(task_id="t", status=env.TASK_STATUS_ERROR, patch="diff")
        r.output.text = "x"
        r.output.structured.update({"a": 1})
        r.errors.add(code="boom", message="it broke")
        r.usage.input_tokens = 5
        r.usage.cost_usd = 0.5
        (event,) = events_of_watch(api.WatchEvent(result=r))
        assert isinstance(event, ResultEvent) and event.result is not None
        result = event.result
        self.assertEqual(result.status, "error")
        self.assertEqual(result.structured, {"a": 1})
        self.assertEqual(result.errors, [("boom", "it broke")])
        self.assertEqual(result.errors[0].code, "boom")
        self.assertEqual((result.usage.input_tokens, result.usage.cost_usd), (5, 0.5))
        self.assertIsNone(result.own_usage.cost_usd)

    @unittest.skipUnless(
        "webhook" in api.Task.DESCRIPTOR.fields_by_name, "the protos have no webhook yet"
    )
    def test_a_task_with_a_webhook(self) -> None:
        t = api.Task(task_id="t", status=env.TASK_STATUS_QUEUED)
        t.created_at.FromDatetime(datetime(2026, 1, 2, tzinfo=timezone.utc))
        t.webhook.url = "https://example.com/hook"
        t.webhook.state = api.WebhookState.Value("WEBHOOK_STATE_WAITING")  # type: ignore[assignment]
        info = TaskInfo.from_proto(t)
        self.assertEqual(info.created_at, datetime(2026, 1, 2, tzinfo=timezone.utc))
        self.assertIsNone(info.updated_at)
        self.assertIsNone(info.result)
        assert info.webhook is not None
        self.assertEqual((info.webhook.url, info.webhook.state), ("https://example.com/hook", "waiting"))


class RequestsTest(unittest.TestCase):
    def test_submit_options_set_their_fields(self) -> None:
        deadline = datetime(2030, 1, 1, tzinfo=timezone.utc)
        r = req.submit_request(
            "general",
            "hi",
            dict(
                input={"a": [1, "b"]},
                output_schema={"type": "object"},
                deadline=deadline,
                max_steps=3,
                max_cost_usd=1.5,
                context_refs=[{"type": "git", "uri": "/repo"}],
                attachments=[env.Attachment(name="a.txt", data=b"x")],
                auth_scope=["read"],
                model=None,
            ),
        )
        self.assertEqual(r.input["a"], [1, "b"])
        self.assertEqual(r.output_schema, '{"type": "object"}')
        self.assertEqual(r.deadline.ToDatetime(tzinfo=timezone.utc), deadline)
        self.assertTrue(r.HasField("max_steps"))
        self.assertFalse(r.HasField("model"))
        self.assertEqual(r.context_refs[0].uri, "/repo")
        self.assertEqual(r.attachments[0].data, b"x")

    @unittest.skipUnless(
        "callback_url" in api.SubmitRequest.DESCRIPTOR.fields_by_name,
        "the protos have no callback_url yet",
    )
    def test_callback_url_is_passed(self) -> None:
        r = req.submit_request("a", "p", {"callback_url": "https://example.com/hook"})
        self.assertEqual(r.callback_url, "https://example.com/hook")

    def test_bad_options(self) -> None:
        with self.assertRaisesRegex(TypeError, "colour"):
            req.submit_request("a", "p", {"colour": "red"})
        with self.assertRaisesRegex(TypeError, "agent"):
            req.submit_request("a", "p", {"agent": "b"})
        with self.assertRaisesRegex(ValueError, "deadline"):
            req.submit_request("a", "p", {"deadline": datetime(2030, 1, 1)})
        with self.assertRaisesRegex(TypeError, "max_steps"):
            req.submit_request("a", "p", {"max_steps": "three"})
        with self.assertRaises(ValueError):
            req.approval_answer("maybe")

    def test_a_delayed_start_is_a_time_or_a_timedelta_and_its_errors_name_it(self) -> None:
        r = req.submit_request("a", "p", {"not_before": timedelta(minutes=30)})
        start = r.not_before.ToDatetime(tzinfo=timezone.utc) - datetime.now(timezone.utc)
        self.assertTrue(timedelta(minutes=29) < start <= timedelta(minutes=30))
        with self.assertRaisesRegex(ValueError, "^not_before: a naive datetime"):
            req.submit_request("a", "p", {"not_before": datetime(2030, 1, 1)})
        with self.assertRaisesRegex(TypeError, "^not_before: expected a datetime"):
            req.submit_request("a", "p", {"not_before": "tomorrow"})

    def test_a_timedelta_deadline_is_from_now(self) -> None:
        ts: timestamp_pb2.Timestamp = req.timestamp(timedelta(minutes=1))
        delta = ts.ToDatetime(tzinfo=timezone.utc) - datetime.now(timezone.utc)
        self.assertTrue(timedelta(seconds=50) < delta <= timedelta(minutes=1))

    def test_addresses(self) -> None:
        self.assertEqual(req.parse_addr("http://127.0.0.1:50051"), ("127.0.0.1:50051", False))
        self.assertEqual(req.parse_addr("https://tw.example.com"), ("tw.example.com:443", True))
        self.assertEqual(req.parse_addr("localhost:1"), ("localhost:1", False))
        with self.assertRaises(ValueError):
            req.parse_addr("ftp://x:1")


if __name__ == "__main__":
    unittest.main()
