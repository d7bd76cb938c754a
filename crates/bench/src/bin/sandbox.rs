//! `sandbox`: what the command sandbox costs, measured through the `bash` tool itself.
//!
//! Every command goes through `BashTool::execute`, as a session's tool call does:
//! `bash -c <command>` with the scrubbed environment, the private temp dir, the
//! Landlock ruleset, seccomp filters, rlimits, dropped capabilities and the pids cgroup
//! (when one is writable), the output pumps, and the clean-up after. Three ways:
//!
//! - `unsandboxed`: the tool built with `--unsafe-no-sandbox`'s mode;
//! - `sandboxed`: the worker's default, network closed;
//! - `sandboxed+net`: the session has a `network` allow rule, so each command also gets
//!   its own filtering HTTP proxy (a listener on a random port, stopped after).
//!
//! Per command: wall time of `true` and of `sh -c 'echo hi'`, `--runs` times each
//! after a warm-up, p50/p99/mean, and what the sandbox adds. Per running command: the
//! worker's resident set and open descriptors while `--concurrent` commands
//! (`sleep`) run at once, against the same number unsandboxed; and after they ended
//! (nothing is held between commands, so an idle session holds nothing).
//!
//! Usage: `sandbox [--runs N] [--concurrent N]`

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::json;
use taskwire_agent::host::NoopHost;
use taskwire_agent::session::NoopObserver;
use taskwire_agent::tools::{BashTool, CommandSandbox, NETWORK_PERMISSION, Tool, ToolContext};
use taskwire_agent::{SessionState, Workspace};
use taskwire_definitions::permission::Permissions;
use taskwire_definitions::{PermissionAction, PermissionRule};
use tokio_util::sync::CancellationToken;

/// The same allocator as the `taskwire` binary, so the figures are the product's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const WARM_UP: usize = 10;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let mut runs = 200usize;
    let mut concurrent = 100usize;
    let mut probe: Option<usize> = None;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || -> anyhow::Result<usize> {
            Ok(args.next().context("a flag needs a value")?.parse()?)
        };
        match flag.as_str() {
            "--runs" => runs = value()?.max(1),
            "--concurrent" => concurrent = value()?.max(1),
            // Internal: one memory measurement in a fresh process (see `memory`).
            "--memory-probe" => probe = Some(value()?),
            other => bail!("unknown flag {other} (usage: sandbox [--runs N] [--concurrent N])"),
        }
    }
    let support = taskwire_sandbox::probe();
    let sandboxed = CommandSandbox::new(support, false, &[], Vec::new());
    if let CommandSandbox::Refused { reason } = &sandboxed {
        bail!("the sandbox is unavailable here: {reason}");
    }
    let dir = tempfile::tempdir()?;
    let workspace = Workspace::new(dir.path())?;
    let state = SessionState::new();
    // A session that may reach one host: each command gets a proxy. The rules live
    // for the whole run, as a session's do.
    let open: &'static [PermissionRule] = Box::leak(Box::new([PermissionRule::new(
        NETWORK_PERMISSION,
        "example.com",
        PermissionAction::Allow,
    )]));
    let closed: &'static [PermissionRule] = &[];
    let ways = [
        ("unsandboxed", CommandSandbox::Unsandboxed, closed),
        ("sandboxed", sandboxed.clone(), closed),
        ("sandboxed+net", sandboxed, open),
    ];
    if let Some(way) = probe {
        let ways = &ways;
        let (_, sandbox, rules) = ways.get(way).context("no such way")?;
        let tool = BashTool::new(sandbox.clone());
        let ctx = ToolContext {
            workspace: workspace.clone(),
            cancel: CancellationToken::new(),
            host: &NoopHost,
            observer: &NoopObserver,
            state: &state,
            call_id: String::new(),
            permissions: Permissions::new(rules, &[]),
        };
        // One command first, so that the runtime, the pumps' buffers and (when
        // sandboxed) the sandbox's lazily built state are in the baseline.
        time_runs(&tool, &ctx, "true", 1).await?;
        let before = (rss_kib()?, open_fds());
        let (rss, fds, children) = while_running(&tool, &ctx, concurrent).await?;
        let after = (rss_kib()?, open_fds());
        println!(
            "{} {} {rss} {fds} {children} {} {}",
            before.0, before.1, after.0, after.1
        );
        return Ok(());
    }
    let context = |rules: &'static [PermissionRule]| ToolContext {
        workspace: workspace.clone(),
        cancel: CancellationToken::new(),
        host: &NoopHost,
        observer: &NoopObserver,
        state: &state,
        call_id: String::new(),
        permissions: Permissions::new(rules, &[]),
    };

    println!("machine: {}", machine());
    println!("sandbox: {support:?}");
    println!();
    println!("wall time per command through the bash tool, {runs} runs each:");
    for command in ["true", "sh -c 'echo hi'"] {
        let mut p50s = Vec::new();
        for (name, sandbox, rules) in &ways {
            let tool = BashTool::new(sandbox.clone());
            let ctx = context(rules);
            let samples = time_runs(&tool, &ctx, command, runs).await?;
            println!("  {command:<18} {name:<14} {}", samples.summary());
            p50s.push((samples.p(0.50), samples.p(0.99)));
        }
        let (plain, plain99) = p50s[0];
        for (i, label) in [(1, "sandbox"), (2, "sandbox+proxy")] {
            println!(
                "  {command:<18} added by {label:<14} p50 {:+.2} ms, p99 {:+.2} ms",
                ms(p50s[i].0) - ms(plain),
                ms(p50s[i].1) - ms(plain99)
            );
        }
    }

    println!();
    println!(
        "worker memory per running command: {concurrent} concurrent `sleep 2`, each way in a \
         fresh process (resident set and open descriptors of the process that runs the tool, \
         before and once all commands run):"
    );
    let mut held = Vec::new();
    for (way, (name, _, _)) in ways.iter().enumerate() {
        let m = memory(way, concurrent)?;
        let per = |a: u64, b: u64| (a as f64 - b as f64) / concurrent as f64;
        println!(
            "  {name:<14} +{} KiB RSS ({:.1} KiB per command), +{} descriptors ({:.1} per command); \
             the commands' own processes {} KiB RSS in all; after they ended {:+} KiB RSS, {:+} descriptors",
            m.rss.saturating_sub(m.rss_before),
            per(m.rss, m.rss_before),
            m.fds.saturating_sub(m.fds_before),
            per(m.fds, m.fds_before),
            m.children,
            m.rss_after as i64 - m.rss_before as i64,
            m.fds_after as i64 - m.fds_before as i64
        );
        held.push((per(m.rss, m.rss_before), per(m.fds, m.fds_before)));
    }
    for (i, label) in [(1, "sandbox"), (2, "sandbox+proxy")] {
        println!(
            "  added by {label:<14} {:+.1} KiB RSS and {:+.1} descriptors per running command",
            held[i].0 - held[0].0,
            held[i].1 - held[0].1
        );
    }
    println!(
        "  between commands (an idle session): no sandbox state is held; the temp dir, \
         ruleset, cgroup and proxy live only while a command runs"
    );
    Ok(())
}

/// One way's memory figures (KiB and descriptor counts).
struct Memory {
    rss_before: u64,
    fds_before: u64,
    rss: u64,
    fds: u64,
    children: u64,
    rss_after: u64,
    fds_after: u64,
}

/// Runs this binary again with `--memory-probe way`, so that each way starts from a
/// fresh process and allocator, and reads its figures.
fn memory(way: usize, concurrent: usize) -> anyhow::Result<Memory> {
    let out = std::process::Command::new(std::env::current_exe()?)
        .args([
            "--memory-probe",
            &way.to_string(),
            "--concurrent",
            &concurrent.to_string(),
        ])
        .output()?;
    if !out.status.success() {
        bail!(
            "memory probe failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = String::from_utf8(out.stdout)?;
    let n: Vec<u64> = text
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .with_context(|| format!("unreadable memory probe output: {text}"))?;
    let [
        rss_before,
        fds_before,
        rss,
        fds,
        children,
        rss_after,
        fds_after,
    ] = n[..]
    else {
        bail!("unreadable memory probe output: {text}");
    };
    Ok(Memory {
        rss_before,
        fds_before,
        rss,
        fds,
        children,
        rss_after,
        fds_after,
    })
}

/// `runs` timed calls of `command` through `tool`, after a warm-up.
async fn time_runs(
    tool: &BashTool,
    ctx: &ToolContext<'_>,
    command: &str,
    runs: usize,
) -> anyhow::Result<Samples> {
    let mut samples = Vec::with_capacity(runs);
    for i in 0..WARM_UP + runs {
        let started = Instant::now();
        let out = tool
            .execute(json!({ "command": command, "description": "bench" }), ctx)
            .await
            .map_err(|e| anyhow::anyhow!("{command}: {e}"))?;
        let elapsed = started.elapsed();
        if !out.output.ends_with("(exit code 0)") {
            bail!("{command} failed: {}", out.output);
        }
        if i >= WARM_UP {
            samples.push(elapsed);
        }
    }
    samples.sort();
    Ok(Samples(samples))
}

/// Starts `n` sleeping commands through `tool` at once; once all are running, the
/// worker's RSS (KiB) and open descriptors, and the commands' processes' RSS (KiB).
async fn while_running(
    tool: &BashTool,
    ctx: &ToolContext<'_>,
    n: usize,
) -> anyhow::Result<(u64, usize, u64)> {
    let calls =
        (0..n).map(|_| tool.execute(json!({ "command": "sleep 2", "description": "bench" }), ctx));
    let all = futures::future::join_all(calls);
    let sample = async {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let running = sleeping_descendants();
            if running.len() >= n {
                let children: u64 = running.iter().map(|pid| rss_of(*pid)).sum();
                return Ok((rss_kib()?, open_fds(), children));
            }
            if Instant::now() > deadline {
                bail!("only {} of {n} commands started", running.len());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let (outputs, sampled) = tokio::join!(all, sample);
    for out in outputs {
        out.map_err(|e| anyhow::anyhow!("sleep: {e}"))?;
    }
    sampled
}

/// The `sleep` processes under this one (each command's own process).
fn sleeping_descendants() -> Vec<u32> {
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "sleep")
                && descends_from(*pid, me)
        })
        .collect()
}

fn descends_from(mut pid: u32, ancestor: u32) -> bool {
    for _ in 0..8 {
        let Some(parent) = parent_of(pid) else {
            return false;
        };
        if parent == ancestor {
            return true;
        }
        pid = parent;
    }
    false
}

fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')')
        .next()?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The RSS of `pid` and of its parent chain up to the tool's `bash` (KiB), read from
/// `/proc/<pid>/status`.
fn rss_of(pid: u32) -> u64 {
    let mut total = status_kib(pid, "VmRSS:");
    // `bash -c 'sleep 2'` usually execs `sleep` in place; count a waiting bash too.
    if let Some(parent) = parent_of(pid)
        && std::fs::read_to_string(format!("/proc/{parent}/comm")).is_ok_and(|c| c.trim() == "bash")
    {
        total += status_kib(parent, "VmRSS:");
    }
    total
}

fn status_kib(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn rss_kib() -> anyhow::Result<u64> {
    match status_kib(std::process::id(), "VmRSS:") {
        0 => bail!("no VmRSS in /proc/self/status"),
        kib => Ok(kib),
    }
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

/// CPU model, cores, memory and kernel, for the report.
fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "unknown cpu".to_owned());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or_else(
            || "?".to_owned(),
            |kib| format!("{} GiB", kib / 1024 / 1024),
        );
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|k| k.trim().to_owned())
        .unwrap_or_default();
    let load = std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    format!("{cpu}, {cores} cores, {memory} RAM, Linux {kernel}, load average {load}")
}

struct Samples(Vec<Duration>);

impl Samples {
    fn p(&self, q: f64) -> Duration {
        let index = ((self.0.len() as f64 - 1.0) * q).round() as usize;
        self.0[index.min(self.0.len() - 1)]
    }

    fn summary(&self) -> String {
        let mean = self.0.iter().sum::<Duration>() / self.0.len().max(1) as u32;
        format!(
            "p50 {:6.2} ms, p99 {:6.2} ms, mean {:6.2} ms",
            ms(self.p(0.50)),
            ms(self.p(0.99)),
            ms(mean)
        )
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
