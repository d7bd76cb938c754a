"""AsyncClient against the same fleet (see test_client.py)."""

from __future__ import annotations

import unittest
import uuid
from typing import Dict, List

from taskwire import (
    ApprovalRequired,
    AsyncClient,
    ChildTask,
    Event,
    NotFound,
    ResultEvent,
    StepStarted,
    Text,
)

from support import PATIENCE, addr, token, unique


class AsyncClientTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self) -> None:
        self.client = AsyncClient(addr(), token=token(), timeout=PATIENCE)

    async def asyncTearDown(self) -> None:
        await self.client.close()

    async def test_submit_and_wait(self) -> None:
        prompt = unique("async")
        task = await self.client.submit("general", prompt)
        self.assertTrue(task.created)
        result = await task.wait(timeout=PATIENCE)
        self.assertEqual(result.status, "completed", result)
        self.assertEqual(result.text, f"done: {prompt}")
        info = await task.get()
        self.assertEqual(info.status, "completed")

    async def test_events(self) -> None:
        prompt = unique("async events")
        task = await self.client.submit("general", prompt)
        events: List[Event] = [e async for e in task.events(timeout=PATIENCE)]
        kinds = [type(e) for e in events]
        self.assertIs(kinds[-1], ResultEvent)
        self.assertLess(kinds.index(StepStarted), kinds.index(Text))
        self.assertEqual(
            "".join(e.text for e in events if isinstance(e, Text)), f"done: {prompt}"
        )

    async def test_tree_with_approval(self) -> None:
        parent = await self.client.submit("general", "parent: two children")
        children: Dict[str, str] = {}
        answered = set()
        result = None
        async for event in parent.events(timeout=PATIENCE):
            if isinstance(event, ChildTask):
                children[event.agent] = event.task_id
            elif isinstance(event, ApprovalRequired) and event.request_id not in answered:
                answered.add(event.request_id)
                await self.client.approve(event.task_id, event.request_id, "once")
            elif isinstance(event, ResultEvent):
                result = event.result
        self.assertEqual(set(children), {"asker", "explore"})
        self.assertEqual(len(answered), 1)
        assert result is not None
        self.assertEqual(result.status, "completed")
        listed = await self.client.list(parent_task_id=parent.task_id)
        self.assertEqual({t.task_id for t in listed}, set(children.values()))

    async def test_errors_and_other_calls(self) -> None:
        with self.assertRaises(NotFound):
            await self.client.get(str(uuid.uuid4()))
        with self.assertRaises(NotFound):
            await self.client.submit("no-such-agent", "hi")
        with self.assertRaises(TypeError):
            await self.client.submit("general", "hi", no_such_option=1)
        names = [a.name for a in await self.client.agents()]
        self.assertIn("general", names)
        greet = await self.client.run_command("greet", "Cy")
        self.assertEqual((await greet.wait(timeout=PATIENCE)).text, "done: greet Cy")

    async def test_wait_timeout_and_cancel(self) -> None:
        parent = await self.client.submit("general", "parent: two children")
        async for event in parent.events(timeout=PATIENCE):
            if isinstance(event, ApprovalRequired):
                break
        with self.assertRaises(TimeoutError):
            await parent.wait(timeout=1)
        self.assertEqual(await parent.cancel("done testing"), "cancelled")
        self.assertEqual((await parent.wait(timeout=PATIENCE)).status, "cancelled")

    async def test_the_client_is_an_async_context_manager(self) -> None:
        async with AsyncClient(addr(), token=token()) as client:
            self.assertTrue(await client.agents())


if __name__ == "__main__":
    unittest.main()
