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
// node's usage as the API records it; saves screenshots of the tree and the list pages into OUT_DIR. Prints one JSON line describing what it saw; exits
// non-zero (with the reason on stderr) on anything else, a script error included.
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

    if (errors.length) throw new Error("errors on the page: " + errors.join("; "));
    console.log(JSON.stringify({ asker, request, same_load: sameLoad, nodes, reloaded_nodes: reloadedNodes, rows,
      list_status_before: listStatusBefore, list_same_load: listSameLoad, screenshots: [tree, list] }));
  } finally {
    await browser.close();
  }
}

main().catch((e) => { console.error(e && e.stack ? e.stack : String(e)); process.exit(1); });
