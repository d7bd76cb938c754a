//! CPU time and memory of processes, read from `/proc`.
//!
//! A [`Meter`] is a named set of processes (a coordinator, every worker, nats-server,
//! or a Postgres postmaster with its backends). [`Meter::cpu`] sums user and system
//! time, including that of exited children the process has reaped (`cutime`,
//! `cstime`): Postgres backends that end during a phase still count, through their
//! postmaster. The difference of two readings over a phase, divided by the work done in
//! it, is the CPU cost per unit of work.

use std::time::Duration;

use anyhow::Context;
use procfs::process::Process;

/// Which processes a meter reads.
#[derive(Debug, Clone)]
pub enum Meter {
    /// These processes.
    Pids(Vec<u32>),
    /// This process and every live process whose parent it is (a postmaster).
    Tree(u32),
}

impl Meter {
    /// The CPU time (user + system, reaped children included) the processes have used.
    pub fn cpu(&self) -> anyhow::Result<Duration> {
        let ticks = procfs::ticks_per_second() as f64;
        let pids = self.pids()?;
        let mut total: i64 = 0;
        for pid in pids {
            // A backend may end between the listing and the read: it then counts
            // through its parent's reaped-children time.
            let Ok(stat) = Process::new(pid as i32).and_then(|p| p.stat()) else {
                continue;
            };
            total += (stat.utime + stat.stime) as i64 + stat.cutime + stat.cstime;
        }
        Ok(Duration::from_secs_f64(total.max(0) as f64 / ticks))
    }

    /// The resident set of the processes (`VmRSS`), in bytes.
    pub fn rss(&self) -> anyhow::Result<u64> {
        let mut total = 0;
        for pid in self.pids()? {
            let status = Process::new(pid as i32)
                .and_then(|p| p.status())
                .with_context(|| format!("failed to read /proc/{pid}/status"))?;
            total += status.vmrss.unwrap_or(0) * 1024;
        }
        Ok(total)
    }

    fn pids(&self) -> anyhow::Result<Vec<u32>> {
        match self {
            Meter::Pids(pids) => Ok(pids.clone()),
            Meter::Tree(root) => {
                let mut pids = vec![*root];
                let all = procfs::process::all_processes().context("failed to list /proc")?;
                for process in all.flatten() {
                    if let Ok(stat) = process.stat()
                        && stat.ppid == *root as i32
                    {
                        pids.push(stat.pid as u32);
                    }
                }
                Ok(pids)
            }
        }
    }
}

/// CPU readings of several meters, taken together at the start of a phase.
#[derive(Debug)]
pub struct Readings(Vec<Duration>);

impl Readings {
    /// Reads every meter now.
    pub fn take(meters: &[Meter]) -> anyhow::Result<Self> {
        meters
            .iter()
            .map(Meter::cpu)
            .collect::<Result<_, _>>()
            .map(Self)
    }

    /// The CPU each meter used since these readings, per unit of `work`, in µs.
    pub fn per_unit_since(&self, meters: &[Meter], work: usize) -> anyhow::Result<Vec<f64>> {
        let now = Self::take(meters)?;
        Ok(self
            .0
            .iter()
            .zip(now.0)
            .map(|(before, after)| {
                after.saturating_sub(*before).as_secs_f64() * 1e6 / work.max(1) as f64
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_uses_cpu_and_memory() {
        let me = Meter::Pids(vec![std::process::id()]);
        let before = me.cpu().expect("cpu");
        let mut x = 0u64;
        for i in 0..50_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(me.cpu().expect("cpu") > before);
        assert!(me.rss().expect("rss") > 0);
    }

    #[test]
    fn a_reaped_child_counts_for_its_parent() {
        let own = || {
            let stat = Process::myself().and_then(|p| p.stat()).expect("stat");
            Duration::from_secs_f64(
                (stat.utime + stat.stime) as f64 / procfs::ticks_per_second() as f64,
            )
        };
        let me = Meter::Pids(vec![std::process::id()]);
        let (before, own_before) = (me.cpu().expect("cpu"), own());
        let status = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done"])
            .status()
            .expect("sh");
        assert!(status.success());
        let (after, own_after) = (me.cpu().expect("cpu"), own());
        let children = (after - before).saturating_sub(own_after - own_before);
        assert!(
            children >= Duration::from_millis(100),
            "the child's CPU is not counted: {children:?}"
        );
    }

    #[test]
    fn a_tree_holds_its_children() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        let tree = Meter::Tree(std::process::id()).pids().expect("pids");
        let _ = child.kill();
        let _ = child.wait();
        assert!(tree.contains(&std::process::id()));
        assert!(tree.contains(&child.id()), "{tree:?}");
    }
}
