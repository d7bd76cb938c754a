//! `sandbox-cost`: what the command sandbox adds to one command, and what a worker
//! holds for it.
//!
//! Runs `bash -c true` `--runs` times plainly and `--runs` times confined as the
//! `bash` tool confines it (private temp dir, Landlock ruleset, seccomp filters,
//! rlimits, capabilities dropped, pids cgroup when available, all removed after),
//! and prints p50/p99/mean wall time of each, spawn to reaped and cleaned up. Then
//! the memory the worker's one `Sandbox` holds (resident set before and after
//! building it) and the open descriptors it keeps. Nothing is held per session: a
//! command's ruleset, temp dir and cgroup live only while it runs.
//!
//! Usage: `sandbox-cost [--runs N]`

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use taskwire_sandbox::{Limits, Network, PrivateTemp, Sandbox, SandboxPolicy};

fn main() -> anyhow::Result<()> {
    let mut runs = 200usize;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match flag.as_str() {
            "--runs" => runs = args.next().context("--runs needs a value")?.parse()?,
            other => anyhow::bail!("unknown flag {other}"),
        }
    }
    let fds_before = open_fds();
    let rss_before = rss_kib()?;
    let built = Instant::now();
    let sandbox = Sandbox::probe_and_build().context("the sandbox is unavailable here")?;
    let build_time = built.elapsed();
    let rss_after = rss_kib()?;
    let fds_after = open_fds();
    let workspace = tempfile::tempdir()?;

    let plain = measure(runs, || {
        let status = bash().status()?;
        anyhow::ensure!(status.success(), "bash failed: {status}");
        Ok(())
    })?;
    // Time spent per stage, summed over the confined runs.
    let mut stages = [Duration::ZERO; 4];
    let confined = measure(runs, || {
        let t0 = Instant::now();
        let temp = PrivateTemp::create()?;
        let policy = SandboxPolicy {
            workspace: workspace.path().to_owned(),
            temp_dir: temp.path().to_owned(),
            network: Network::Closed,
            limits: Limits::default(),
        };
        let mut command = bash();
        command.env("TMPDIR", temp.path());
        let t1 = Instant::now();
        let confinement = sandbox.confine(&mut command, &policy)?;
        let t2 = Instant::now();
        let status = command.status()?;
        let t3 = Instant::now();
        drop(confinement);
        drop(temp);
        let t4 = Instant::now();
        for (stage, (from, to)) in stages
            .iter_mut()
            .zip([(t0, t1), (t1, t2), (t2, t3), (t3, t4)])
        {
            *stage += to - from;
        }
        anyhow::ensure!(status.success(), "confined bash failed: {status}");
        Ok(())
    })?;

    println!("sandbox support: {:?}", sandbox.support());
    println!("bash -c true, {runs} runs each (wall time, spawn to reaped and cleaned up):");
    println!("  plain     {}", plain.summary());
    println!("  sandboxed {}", confined.summary());
    println!(
        "  added     p50 {:.2} ms, p99 {:.2} ms",
        ms(confined.p(0.50)) - ms(plain.p(0.50)),
        ms(confined.p(0.99)) - ms(plain.p(0.99))
    );
    let mean = |d: Duration| ms(d) / runs.max(1) as f64;
    println!(
        "  sandboxed stages (mean): temp dir {:.2} ms, ruleset and cgroup {:.2} ms, \
         spawn to exit {:.2} ms, cleanup {:.2} ms",
        mean(stages[0]),
        mean(stages[1]),
        mean(stages[2]),
        mean(stages[3])
    );
    println!(
        "per worker: Sandbox built in {:.1} ms, resident set +{} KiB, {} open descriptors",
        ms(build_time),
        rss_after.saturating_sub(rss_before),
        fds_after.saturating_sub(fds_before)
    );
    println!("per session: nothing held between commands");
    Ok(())
}

fn bash() -> Command {
    let mut command = Command::new("bash");
    command
        .args(["-c", "true"])
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    command
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
            "p50 {:.2} ms, p99 {:.2} ms, mean {:.2} ms",
            ms(self.p(0.50)),
            ms(self.p(0.99)),
            ms(mean)
        )
    }
}

fn measure(runs: usize, mut one: impl FnMut() -> anyhow::Result<()>) -> anyhow::Result<Samples> {
    let mut samples = Vec::with_capacity(runs);
    for _ in 0..runs.max(1) {
        let started = Instant::now();
        one()?;
        samples.push(started.elapsed());
    }
    samples.sort();
    Ok(Samples(samples))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn rss_kib() -> anyhow::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmRSS in /proc/self/status")
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}
