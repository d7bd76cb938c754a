"""The blocking client against a real fleet (the scripted model's tree script and the
definitions in sdk/testdata/config): `general` answers `p` with `done: p`; `parent: two
children` starts an `asker` child (which asks before a command) and an `explore` child;
`/greet NAME` sends `greet NAME` to `general`."""

from __future__ import annotations

import unittest
import uuid
from datetime import datetime, timedelta, timezone
from typing import Dict, List

import taskwire
from taskwire import (
    ApprovalRequired,
    ChildTask,
    Client,
    Event,
    FailedPrecondition,
    NotFound,
    ResultEvent,
    StepFinished,
    StepStarted,
    TaskwireError,
    Text,
    Unauthenticated,
)
from taskwire.v1 import task_service_pb2

from support import PATIENCE, addr, token, unique

TREE_PROMPT = "parent: two children"


class ClientTest(unittest.TestCase):
    client: Client

    @classmethod
    def setUpClass(cls) -> None:
        cls.client = Client(addr(), token=token(), timeout=PATIENCE)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.client.close()

    def test_submit_and_wait_returns_the_answer(self) -> None:
        prompt = unique("hello")
        task = self.client.submit("general", prompt)
        self.assertTrue(task.task_id)
        self.assertTrue(task.trace_id)
        self.assertTrue(task.created)
        result = task.wait(timeout=PATIENCE)
        self.assertEqual(result.status, "completed", result)
        self.assertTrue(result.ok)
        self.assertEqual(result.text, f"done: {prompt}")
        self.assertEqual(result.task_id, task.task_id)
        self.assertEqual(result.errors, [])
        self.assertIsNone(result.structured)
        self.assertIsNotNone(result.raw)

    def test_events_come_in_order_step_text_result(self) -> None:
        prompt = unique("events")
        task = self.client.submit("general", prompt)
        events: List[Event] = list(task.events(timeout=PATIENCE))
        kinds = [type(e) for e in events]
        self.assertIn(StepStarted, kinds)
        self.assertIn(Text, kinds)
        self.assertIn(StepFinished, kinds)
        self.assertIs(kinds[-1], ResultEvent, kinds)
        self.assertEqual(kinds.count(ResultEvent), 1)
        self.assertLess(kinds.index(StepStarted), kinds.index(Text))
        self.assertLess(kinds.index(Text), kinds.index(StepFinished))
        text = "".join(e.text for e in events if isinstance(e, Text))
        self.assertEqual(text, f"done: {prompt}")
        for e in events:
            self.assertEqual(e.task_id, task.task_id, e)
        finished = [e for e in events if isinstance(e, StepFinished)]
        self.assertEqual(finished[0].usage.input_tokens, 100)
        self.assertEqual(finished[0].usage.output_tokens, 10)
        last = events[-1]
        assert isinstance(last, ResultEvent) and last.result is not None
        self.assertEqual(last.result.status, "completed")
        self.assertEqual(last.result.text, f"done: {prompt}")
        seqs = [e.seq for e in events if not isinstance(e, ResultEvent)]
        self.assertEqual(seqs, sorted(seqs))

    def test_a_tree_shows_its_children_and_the_askers_approval(self) -> None:
        parent = self.client.submit("general", TREE_PROMPT)
        children: Dict[str, str] = {}  # agent -> task id
        approvals: List[ApprovalRequired] = []
        answered = set()
        result = None
        for event in parent.events(timeout=PATIENCE):
            if isinstance(event, ChildTask):
                self.assertEqual(event.parent_task_id, parent.task_id)
                children[event.agent] = event.task_id
            elif isinstance(event, ApprovalRequired):
                approvals.append(event)
                if event.request_id not in answered:
                    answered.add(event.request_id)
                    status = self.client.approve(event.task_id, event.request_id, "once")
                    self.assertIsInstance(status, str)
            elif isinstance(event, ResultEvent):
                result = event.result
        self.assertEqual(set(children), {"asker", "explore"}, children)
        self.assertTrue(approvals, "no approval_required event")
        asking = approvals[0]
        self.assertEqual(asking.task_id, children["asker"])
        self.assertEqual(asking.permission, "bash")
        self.assertTrue(asking.request_id)
        self.assertIsNotNone(result)
        assert result is not None
        self.assertEqual(result.status, "completed", result)
        self.assertEqual(result.task_id, parent.task_id)

        listed = self.client.list(parent_task_id=parent.task_id)
        self.assertEqual({t.task_id for t in listed}, set(children.values()))
        self.assertEqual({t.agent for t in listed}, {"asker", "explore"})
        for child in listed:
            self.assertEqual(child.parent_task_id, parent.task_id)
            self.assertEqual(child.trace_id, parent.trace_id)
            self.assertEqual(child.status, "completed", child)
        same_trace = self.client.list(trace_id=parent.trace_id)
        self.assertLessEqual(
            {parent.task_id, *children.values()}, {t.task_id for t in same_trace}
        )

    def test_get_describes_a_finished_task(self) -> None:
        prompt = unique("get")
        deadline = datetime.now(timezone.utc) + timedelta(minutes=10)
        task = self.client.submit(
            "general",
            prompt,
            input={"k": "v", "n": 1},
            deadline=deadline,
            priority=2,
            max_steps=5,
            intent="testing",
            auth_scope=["read"],
        )
        task.wait(timeout=PATIENCE)
        info = task.get()
        self.assertEqual(info.task_id, task.task_id)
        self.assertEqual(info.trace_id, task.trace_id)
        self.assertEqual(info.agent, "general")
        self.assertEqual(info.prompt, prompt)
        self.assertEqual(info.status, "completed")
        self.assertEqual(info.parent_task_id, "")
        self.assertEqual(info.priority, 2)
        self.assertGreaterEqual(info.attempt, 1)
        self.assertIsInstance(info.created_at, datetime)
        assert info.created_at is not None and info.updated_at is not None
        self.assertIsNotNone(info.created_at.tzinfo)
        self.assertLessEqual(info.created_at, info.updated_at)
        assert info.deadline is not None
        self.assertLess(abs((info.deadline - deadline).total_seconds()), 1.0)
        self.assertIsNotNone(info.result)
        assert info.result is not None
        # The worker hands the model the input after the prompt.
        self.assertTrue(info.result.text.startswith(f"done: {prompt}"), info.result.text)
        self.assertIn('"k": "v"', info.result.text)
        self.assertEqual(info.usage.input_tokens, 100)
        self.assertIsNone(info.webhook)
        self.assertIsInstance(info.raw, task_service_pb2.Task)
        self.assertTrue(info.worker)
        self.assertTrue(info.finished)

    def test_list_filters(self) -> None:
        task = self.client.submit("general", unique("list"))
        task.wait(timeout=PATIENCE)
        by_trace = self.client.list(trace_id=task.trace_id)
        self.assertIn(task.task_id, [t.task_id for t in by_trace])
        for t in by_trace:
            self.assertEqual(t.trace_id, task.trace_id)
        done = self.client.list(status="completed", agent="general", limit=3)
        self.assertLessEqual(len(done), 3)
        self.assertTrue(done)
        for t in done:
            self.assertEqual(t.status, "completed")
            self.assertEqual(t.agent, "general")

    def test_get_of_an_unknown_task_raises_not_found(self) -> None:
        with self.assertRaises(NotFound) as caught:
            self.client.get(str(uuid.uuid4()))
        self.assertEqual(caught.exception.code, "NOT_FOUND")
        self.assertIsInstance(caught.exception, TaskwireError)

    def test_submit_to_an_unknown_agent_raises_not_found(self) -> None:
        with self.assertRaises(NotFound) as caught:
            self.client.submit("no-such-agent", "hi")
        self.assertEqual(caught.exception.code, "NOT_FOUND")
        self.assertIn("no-such-agent", caught.exception.message)

    def test_an_unknown_submit_option_raises_type_error(self) -> None:
        with self.assertRaises(TypeError) as caught:
            self.client.submit("general", "hi", no_such_option=1)
        self.assertIn("no_such_option", str(caught.exception))

    def test_an_idempotency_key_returns_the_same_task(self) -> None:
        key = uuid.uuid4().hex
        prompt = unique("idempotent")
        first = self.client.submit("general", prompt, idempotency_key=key)
        second = self.client.submit("general", prompt, idempotency_key=key)
        self.assertTrue(first.created)
        self.assertFalse(second.created)
        self.assertEqual(first.task_id, second.task_id)
        self.assertEqual(second.wait(timeout=PATIENCE).text, f"done: {prompt}")

    def test_cancel_of_a_waiting_task(self) -> None:
        # The tree's asker waits for an approval: the parent cannot finish by itself.
        parent = self.client.submit("general", TREE_PROMPT)
        for event in parent.events(timeout=PATIENCE):
            if isinstance(event, ApprovalRequired):
                break
            self.assertNotIsInstance(event, ResultEvent)
        with self.assertRaises(TimeoutError):
            parent.wait(timeout=1)
        status = parent.cancel("test over")
        self.assertEqual(status, "cancelled")
        result = parent.wait(timeout=PATIENCE)
        self.assertEqual(result.status, "cancelled")
        self.assertEqual(parent.get().status, "cancelled")

    def test_run_command_greet(self) -> None:
        task = self.client.run_command("greet", "Ada")
        self.assertTrue(task.created)
        result = task.wait(timeout=PATIENCE)
        self.assertEqual(result.status, "completed", result)
        self.assertEqual(result.text, "done: greet Ada")
        self.assertEqual(task.get().agent, "general")
        slashed = self.client.run_command("/greet", "Bob").wait(timeout=PATIENCE)
        self.assertEqual(slashed.text, "done: greet Bob")

    def test_run_command_of_an_unknown_command_fails(self) -> None:
        with self.assertRaises(TaskwireError):
            self.client.run_command("no-such-command")
        with self.assertRaises(TypeError):
            self.client.run_command("greet", "x", bogus=True)

    def test_agents_include_general_and_asker(self) -> None:
        agents = {a.name: a for a in self.client.agents()}
        self.assertIn("general", agents)
        self.assertIn("asker", agents)
        asker = agents["asker"]
        self.assertEqual(asker.mode, "subagent")
        self.assertEqual(asker.description, "Runs one command, asking first")
        self.assertIn(("bash", "*", "ask"), [tuple(r) for r in asker.permission])
        hidden = self.client.agents(include_hidden=True)
        self.assertGreaterEqual(len(hidden), len(agents))

    def test_replay_of_a_completed_task_is_refused(self) -> None:
        task = self.client.submit("general", unique("replay"))
        task.wait(timeout=PATIENCE)
        with self.assertRaises(FailedPrecondition) as caught:
            self.client.replay(task.task_id)
        self.assertEqual(caught.exception.code, "FAILED_PRECONDITION")
        with self.assertRaises(NotFound):
            self.client.replay(str(uuid.uuid4()))

    def test_a_task_handle_for_an_existing_id(self) -> None:
        task = self.client.submit("general", unique("handle"))
        again = self.client.task(task.task_id)
        self.assertEqual(again.wait(timeout=PATIENCE).task_id, task.task_id)

    def test_the_generated_modules_are_reachable(self) -> None:
        response = self.client.stub.ListAgents(
            task_service_pb2.ListAgentsRequest(), metadata=self.client.metadata
        )
        self.assertIn("general", [a.name for a in response.agents])
        self.assertTrue(hasattr(taskwire.v1, "task_service_pb2"))

    def test_the_client_is_a_context_manager(self) -> None:
        with Client(addr(), token=token()) as client:
            self.assertTrue(client.agents())


class AuthTest(unittest.TestCase):
    def test_a_wrong_token_raises_unauthenticated(self) -> None:
        if not token():
            self.skipTest("TASKWIRE_TEST_TOKEN is not set: the fleet has no tokens")
        with Client(addr(), token="not-" + str(token())) as client:
            with self.assertRaises(Unauthenticated) as caught:
                client.agents()
        self.assertEqual(caught.exception.code, "UNAUTHENTICATED")
        with Client(addr()) as client:
            with self.assertRaises(Unauthenticated):
                client.get(str(uuid.uuid4()))


if __name__ == "__main__":
    unittest.main()
