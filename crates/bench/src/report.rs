//! The benchmark's figures as a Markdown section: the machine, the command line and a
//! table of every figure with its ratio to the servers' raw rates. The section is
//! printed and replaces the one between [`BEGIN`] and [`END`] in `docs/performance.md`
//! (or is added at its end), so the hand-written sections beside it stay.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;
use procfs::Current;

/// Marks the start of the generated section.
pub const BEGIN: &str = "<!-- taskwire-bench: begin -->";
/// Marks its end.
pub const END: &str = "<!-- taskwire-bench: end -->";

/// One row: what, the figure, and what it is compared with.
#[derive(Debug)]
pub struct Row {
    pub what: String,
    pub value: String,
    pub ratio: String,
}

impl Row {
    pub fn new(
        what: impl Into<String>,
        value: impl Into<String>,
        ratio: impl Into<String>,
    ) -> Self {
        Self {
            what: what.into(),
            value: value.into(),
            ratio: ratio.into(),
        }
    }
}

/// The machine, as `/proc` describes it: cores, CPU model, memory, kernel, load.
pub fn machine() -> String {
    let cpu = procfs::CpuInfo::current().ok();
    let cores = cpu.as_ref().map_or(0, procfs::CpuInfo::num_cores);
    let model = cpu
        .as_ref()
        .and_then(|c| c.model_name(0).map(str::to_owned))
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let ram = procfs::Meminfo::current().map_or(0, |m| m.mem_total) as f64 / (1u64 << 30) as f64;
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    format!("{cores} cores ({model}), {ram:.0} GiB RAM, Linux {kernel}")
}

/// The load average now, as `1 min, 5 min, 15 min`.
pub fn load_average() -> String {
    procfs::LoadAverage::current().map_or_else(
        |_| "unknown".to_owned(),
        |l| format!("{:.2}, {:.2}, {:.2}", l.one, l.five, l.fifteen),
    )
}

/// The section: heading, date, machine, command, loads, then the table and notes.
pub fn section(
    command: &str,
    loads: &[(String, String)],
    rows: &[Row],
    notes: &[String],
) -> String {
    let mut s = String::new();
    let date = chrono::Utc::now().format("%Y-%m-%d %H:%M UTC");
    let _ = writeln!(s, "{BEGIN}");
    let _ = writeln!(s, "### Run of {date}\n");
    let _ = writeln!(s, "- machine: {}", machine());
    let _ = writeln!(s, "- command: `{command}`");
    for (when, load) in loads {
        let _ = writeln!(s, "- load average {when}: {load}");
    }
    let _ = writeln!(s, "\n| figure | value | compared with the raw servers |");
    let _ = writeln!(s, "|---|---|---|");
    for row in rows {
        let _ = writeln!(s, "| {} | {} | {} |", row.what, row.value, row.ratio);
    }
    if !notes.is_empty() {
        let _ = writeln!(s);
        for note in notes {
            let _ = writeln!(s, "{note}");
        }
    }
    let _ = writeln!(s, "{END}");
    s
}

/// `doc` with the generated section replaced by `section`, or `section` added at the
/// end when there is none.
pub fn splice(doc: &str, section: &str) -> String {
    splice_region(doc, (BEGIN, END), section)
}

/// `doc` with the region between the markers `begin` and `end` (both included)
/// replaced by `section`, or `section` added at the end when there is none.
pub fn splice_region(doc: &str, (begin_mark, end_mark): (&str, &str), section: &str) -> String {
    match (doc.find(begin_mark), doc.find(end_mark)) {
        (Some(begin), Some(end)) if begin < end => {
            let after = &doc[end + end_mark.len()..];
            let after = after.strip_prefix('\n').unwrap_or(after);
            format!("{}{section}{after}", &doc[..begin])
        }
        _ => format!(
            "{}\n{section}",
            doc.trim_end_matches('\n').to_owned() + "\n"
        ),
    }
}

/// Writes `section` into the file at `path` (see [`splice`]).
pub fn write(path: &Path, section: &str) -> anyhow::Result<()> {
    write_region(path, (BEGIN, END), section)
}

/// Writes `section` into the file at `path` between `markers` (see [`splice_region`]).
pub fn write_region(path: &Path, markers: (&str, &str), section: &str) -> anyhow::Result<()> {
    let doc = std::fs::read_to_string(path).unwrap_or_default();
    std::fs::write(path, splice_region(&doc, markers, section))
        .with_context(|| format!("failed to write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_section_replaces_the_last_run_and_keeps_the_rest() {
        let first = section("bench", &[], &[Row::new("a", "1", "-")], &[]);
        let doc = splice("# Performance\n\n## Sandbox\n\ntext\n", &first);
        assert!(doc.starts_with("# Performance\n\n## Sandbox\n\ntext\n\n"));
        let second = section("bench", &[], &[Row::new("b", "2", "-")], &[]);
        let doc = splice(&(doc + "\n## After\n"), &second);
        assert!(
            doc.contains("| b | 2 | - |") && !doc.contains("| a | 1 | - |"),
            "{doc}"
        );
        assert!(
            doc.contains("## Sandbox") && doc.ends_with("\n## After\n"),
            "{doc}"
        );
        assert_eq!(doc.matches(BEGIN).count(), 1);
    }

    #[test]
    fn two_regions_are_replaced_each_on_its_own() {
        let other = ("<!-- other: begin -->", "<!-- other: end -->");
        let first = section("bench", &[], &[Row::new("a", "1", "-")], &[]);
        let doc = splice("# P\n", &first);
        let doc = splice_region(
            &doc,
            other,
            "<!-- other: begin -->\nx 1\n<!-- other: end -->\n",
        );
        let doc = splice_region(
            &(doc + "\n## After\n"),
            other,
            "<!-- other: begin -->\nx 2\n<!-- other: end -->\n",
        );
        let second = section("bench", &[], &[Row::new("b", "2", "-")], &[]);
        let doc = splice(&doc, &second);
        assert!(doc.contains("x 2") && !doc.contains("x 1"), "{doc}");
        assert!(doc.contains("| b | 2 | - |") && !doc.contains("| a | 1 | - |"));
        assert!(doc.find(END) < doc.find(other.0), "{doc}");
        assert!(doc.ends_with("\n## After\n"), "{doc}");
    }

    #[test]
    fn the_machine_is_described() {
        assert!(machine().contains("cores"));
    }
}
