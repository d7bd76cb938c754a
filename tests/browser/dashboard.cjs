// Drives the dashboard in headless Chromium (the system's /usr/bin/chromium, through
// playwright-core) for tests/e2e/dashboard.rs:
//
//   node dashboard.cjs BASE_URL PARENT_TASK_ID OUT_DIR
//
// Opens the list (/) and /tasks/PARENT, waits for the parent and its two children to
// appear in the tree, answers the approval a child raises ("allow once") from the
// page, waits until all three nodes say completed — on the same page load — and until
// the list, open since before, shows the three tasks completed without a reload too;
// then opens the finished tree on a second page (its events replayed after the tree
// was read) and reads its nodes again, so the test can check that both pages show each
// node's usage as the API records it; saves screenshots of the tree and the list pages into OUT_DIR.
// Last, the schedules page (after the list's rows were counted: the schedule's task
// must not be one of them): creates an interval schedule (`every: 1h`, for `general`)
// through POST /v1/schedules as the page would (common.js, with the page's token if
// it keeps one), opens /schedules and checks its row, state `active` and first next
// fire time, and the nav links between the pages; clicks Pause and waits for the row
// to say `paused`, clicks Trigger and waits for a `triggered` run linked to its task —
// on the same page load — opens that link (the task's tree), then deletes the
// schedule; saves a screenshot of the schedules page too. Prints one JSON line
// describing what it saw; exits non-zero (with the reason on stderr) on anything
// else, a script error included.
"use strict";

const path = require("path");
const { chromium } = require("playwright-core");

const [base, parent, out] = process.argv.slice(2);
const PATIENCE = 60_000;

async function main() {
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium",
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu"],
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });

    const listPage = await browser.newPage({ viewport: { width: 1280, height: 600 } });
    listPage.on("pageerror", (e) => errors.push(String(e)));
    await listPage.goto(`${base}/`);
    await listPage.waitForSelector(`tr[data-task="${parent}"]`, { timeout: PATIENCE });
    const listStatusBefore = await listPage.getAttribute(`tr[data-task="${parent}"] .status`, "data-status");
    await listPage.evaluate(() => { window.__taskwireLoad = "first"; });

    await page.goto(`${base}/tasks/${parent}`);
    // Marks this page load: a reload would lose it.
    await page.evaluate(() => { window.__taskwireLoad = "first"; });
    await page.waitForFunction(() => document.querySelectorAll(".node").length === 3, null, { timeout: PATIENCE });

    const answer = page.locator('.approval button[data-answer="once"]');
    await answer.first().waitFor({ state: "visible", timeout: PATIENCE });
    const asker = await page.locator(".approval").first().getAttribute("data-task");
    const request = await page.locator(".approval").first().getAttribute("data-request");
    await answer.first().click();

    await page.waitForFunction(
      () => document.querySelectorAll('.node[data-status="completed"]').length === 3,
      null, { timeout: PATIENCE });
    const sameLoad = await page.evaluate(() => window.__taskwireLoad === "first");
  if (!sameLoad) throw new Error("the schedules page reloaded to show the pause and the trigger");
    const readNodes = (p) => p.$$eval(".node", (ns) => ns.map((n) => ({
      task_id: n.dataset.task, status: n.dataset.status, text: n.innerText })));
    await page.waitForFunction(() => document.getElementById("live").textContent === "finished",
      null, { timeout: PATIENCE });
    const nodes = await readNodes(page);
    // Select a child so the screenshot shows a timeline with the answered ask.
    await page.locator(`.node[data-task="${asker}"]`).click();
    await page.waitForSelector('#timeline li[data-kind="tool"]', { timeout: PATIENCE });
    const tree = path.join(out, "dashboard-tree.png");
    await page.screenshot({ path: tree, fullPage: true });

    // The list was loaded while the tree ran: its statuses and new rows came live.
    await listPage.waitForFunction(
      () => document.querySelectorAll('#tasks tr[data-task] .status[data-status="completed"]').length === 3,
      null, { timeout: PATIENCE });
    const listSameLoad = await listPage.evaluate(() => window.__taskwireLoad === "first");
    const rows = await listPage.$$eval("#tasks tbody tr[data-task]", (rs) => rs.length);
    const list = path.join(out, "dashboard-list.png");
    await listPage.screenshot({ path: list, fullPage: true });

    // The finished tree, opened afresh: every event is replayed after the tree was read.
    const again = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    again.on("pageerror", (e) => errors.push(String(e)));
    await again.goto(`${base}/tasks/${parent}`);
    await again.waitForFunction(() => document.getElementById("live").textContent === "finished"
      && document.querySelectorAll('.node[data-status="completed"]').length === 3, null, { timeout: PATIENCE });
    const reloadedNodes = await readNodes(again);

    const schedule = await schedulesPage(browser, errors);
    const listLinksSchedules = (await listPage.$('header nav a[href="/schedules"]')) !== null;
    if (!listLinksSchedules) throw new Error("the list page has no link to /schedules");

    if (errors.length) throw new Error("errors on the page: " + errors.join("; "));
    console.log(JSON.stringify({ asker, request, same_load: sameLoad, nodes, reloaded_nodes: reloadedNodes, rows,
      list_status_before: listStatusBefore, list_same_load: listSameLoad, schedule,
      screenshots: [tree, list, schedule.screenshot] }));
  } finally {
    await browser.close();
  }
}

// The schedules page, as the header says; answers what it saw.
async function schedulesPage(browser, errors) {
  const page = await browser.newPage({ viewport: { width: 1280, height: 700 } });
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  await page.goto(`${base}/schedules`);
  await page.waitForFunction(() => document.getElementById("live").textContent.startsWith("updated"),
    null, { timeout: PATIENCE });

  const name = `browser-${Date.now()}`;
  const created = await page.evaluate((spec) => tw.post("/v1/schedules", spec),
    { name, every: "1h", task: { agent: "general", prompt: "scheduled from the browser" } });
  if (created.name !== name || created.every !== "1h" || created.paused || !created.next_fires.length) {
    throw new Error("POST /v1/schedules answered " + JSON.stringify(created));
  }

  await page.reload();
  await page.evaluate(() => { window.__taskwireLoad = "first"; });
  const row = `#schedules tr[data-schedule="${name}"]`;
  await page.waitForSelector(`${row} .state[data-state="active"]`, { timeout: PATIENCE });
  const nextFire = await page.getAttribute(`${row} .next-first`, "data-next");
  const nextFireText = (await page.textContent(`${row} .next-first`)).trim();
  // The first next fire time the API gave (or a later one, had the hour turned since).
  if (!(Date.parse(nextFire) >= Date.parse(created.next_fires[0])) || !nextFireText) {
    throw new Error(`the next fire shown is ${nextFire} (${nextFireText}), not ${created.next_fires[0]}`);
  }
  const cadence = (await page.textContent(`${row} td.cadence`)).trim();
  if (!cadence.includes("every 1h")) throw new Error("the cadence shown: " + cadence);
  if ((await page.$('header nav a[href="/"]')) === null) throw new Error("the schedules page has no link to /");

  await page.click(`${row} button[data-action="pause"]`);
  await page.waitForSelector(`${row} .state[data-state="paused"]`, { timeout: PATIENCE });
  await page.waitForSelector(`${row} button[data-action="resume"]`, { timeout: PATIENCE });
  const pausedNext = (await page.textContent(`${row} td.next`)).trim();

  await page.click(`${row} button[data-action="trigger"]`);
  const link = `${row} .run[data-outcome="triggered"] a[href^="/tasks/"]`;
  await page.waitForSelector(link, { timeout: PATIENCE });
  const triggeredTask = await page.getAttribute(link, "data-task");
  const href = await page.getAttribute(link, "href");
  if (href !== `/tasks/${triggeredTask}`) throw new Error(`the run links ${href}, not its task ${triggeredTask}`);
  const sameLoad = await page.evaluate(() => window.__taskwireLoad === "first");
  if (!sameLoad) throw new Error("the schedules page reloaded to show the pause and the trigger");
  const screenshot = path.join(out, "dashboard-schedules.png");
  await page.screenshot({ path: screenshot, fullPage: true });

  // The link leads to the triggered task's tree.
  const task = await browser.newPage({ viewport: { width: 1280, height: 700 } });
  task.on("pageerror", (e) => errors.push(String(e)));
  await task.goto(`${base}${href}`);
  await task.waitForSelector(`.node[data-task="${triggeredTask}"]`, { timeout: PATIENCE });
  await task.close();

  await page.evaluate((n) => tw.api("/v1/schedules/" + encodeURIComponent(n), { method: "DELETE" }), name);
  const left = await page.evaluate(() => tw.api("/v1/schedules").then((r) => r.schedules.map((s) => s.name)));
  if (left.includes(name)) throw new Error("the schedule is still listed after DELETE");
  await page.close();
  return { name, next_fire: nextFire, next_fire_text: nextFireText, cadence, paused_next: pausedNext,
    triggered_task: triggeredTask, same_load: sameLoad, screenshot };
}

main().catch((e) => { console.error(e && e.stack ? e.stack : String(e)); process.exit(1); });
