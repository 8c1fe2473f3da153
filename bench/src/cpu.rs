//! CPU time per component, read from `/proc/<pid>/stat` (`utime + stime`, proc(5)).
//!
//! A [`Meter`] samples every [`INTERVAL`] on a thread of its own, remembering each process's
//! first and last reading, so processes that start during the window (a new Postgres backend,
//! an autovacuum worker) count from zero and processes that exit count up to their last sample.
//! Postgres is found as the children of the postmaster (the parent of the bench's own backend)
//! and split by their process title: backends and autovacuum workers of the measured database
//! (`postgres`) versus the server's shared auxiliary processes (`postgres-aux`: checkpointer,
//! WAL writer, background writer…), which every database on the server shares.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// Clock ticks per second of `utime`/`stime` (`USER_HZ`, 100 on Linux for every mainstream
/// architecture).
const TICKS_PER_SECOND: f64 = 100.0;

/// Sampling period: a process that exits loses at most this much of its own CPU time.
pub const INTERVAL: Duration = Duration::from_millis(50);

/// Auxiliary process titles (after `postgres: [cluster: ]`) that serve the whole server.
const AUX: &[&str] = &[
    "checkpointer",
    "background writer",
    "walwriter",
    "autovacuum launcher",
    "logical replication launcher",
    "stats collector",
    "archiver",
];

/// One reading of a process: state, parent, CPU ticks, start time (identity across pid reuse).
struct Stat {
    ppid: u32,
    ticks: u64,
    start: u64,
}

fn read_stat(pid: u32) -> Option<Stat> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name in parentheses: state is field 3 (index 0 here),
    // ppid 4, utime 14, stime 15, starttime 22 (proc(5)).
    let f: Vec<&str> = s.rsplit_once(')')?.1.split_whitespace().collect();
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    Some(Stat {
        ppid: u32::try_from(num(1)?).ok()?,
        ticks: num(11)? + num(12)?,
        start: num(19)?,
    })
}

fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            String::from_utf8_lossy(&b)
                .replace('\0', " ")
                .trim()
                .to_owned()
        })
        .unwrap_or_default()
}

/// The children of `pid`: `/proc/<pid>/task/<pid>/children` where the kernel has it, a scan of
/// `/proc` otherwise.
fn children(pid: u32) -> Vec<u32> {
    if let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")) {
        return s
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
    }
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&c| read_stat(c).is_some_and(|s| s.ppid == pid))
        .collect()
}

/// The Postgres server to attribute: its postmaster and the database whose processes count.
#[derive(Debug, Clone)]
pub struct Postgres {
    /// Postmaster pid.
    pub postmaster: u32,
    /// Database name as it appears in the backends' process titles.
    pub database: String,
}

impl Postgres {
    /// Finds the postmaster as the parent of `backend_pid` (`SELECT pg_backend_pid()`);
    /// `None` when that process is not visible here (a remote or containerised server).
    pub fn from_backend(backend_pid: i32, database: &str) -> Option<Self> {
        let stat = read_stat(u32::try_from(backend_pid).ok()?)?;
        Some(Self {
            postmaster: stat.ppid,
            database: database.to_owned(),
        })
    }

    /// The component a postmaster child belongs to, from its process title, or `None` for
    /// another database's processes.
    fn label(&self, title: &str) -> Option<&'static str> {
        let words: Vec<&str> = title.split_whitespace().collect();
        if words.iter().any(|w| *w == self.database) {
            return Some("postgres");
        }
        let rest = title.rsplit_once(": ").map_or(title, |x| x.1).trim();
        AUX.iter()
            .any(|a| rest.starts_with(a))
            .then_some("postgres-aux")
    }
}

#[derive(Default)]
struct Seen {
    label: &'static str,
    first: u64,
    last: u64,
}

/// What to meter: fixed processes by label, and optionally one database on a local Postgres.
struct Targets {
    fixed: Vec<(&'static str, u32)>,
    pg: Option<Postgres>,
}

impl Targets {
    fn sample(&self, seen: &mut HashMap<(u32, u64), Seen>, baseline: bool) {
        let mut read = |label: &'static str, pid: u32, stat: Stat| {
            let e = seen.entry((pid, stat.start)).or_insert(Seen {
                label,
                first: if baseline { stat.ticks } else { 0 },
                last: 0,
            });
            e.last = stat.ticks;
        };
        for &(label, pid) in &self.fixed {
            if let Some(s) = read_stat(pid) {
                read(label, pid, s);
            }
        }
        if let Some(pg) = &self.pg {
            for pid in std::iter::once(pg.postmaster).chain(children(pg.postmaster)) {
                // A backend among the fixed processes (the bench's own) keeps its label.
                if self.fixed.iter().any(|&(_, p)| p == pid) {
                    continue;
                }
                let Some(s) = read_stat(pid) else { continue };
                let label = if pid == pg.postmaster {
                    Some("postgres-aux")
                } else {
                    pg.label(&cmdline(pid))
                };
                if let Some(label) = label {
                    read(label, pid, s);
                }
            }
        }
    }
}

/// A running CPU meter; [`Meter::stop`] returns CPU seconds per label.
pub struct Meter {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<BTreeMap<String, f64>>,
}

impl Meter {
    /// Starts metering `fixed` processes (label, pid) and, if given, the database's Postgres
    /// processes. Several pids may share a label (two executors); their times add up.
    #[expect(
        clippy::disallowed_methods,
        reason = "a sampler: one CPU reading every INTERVAL"
    )]
    pub fn start(fixed: Vec<(&'static str, u32)>, pg: Option<Postgres>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let targets = Targets { fixed, pg };
            let mut seen = HashMap::new();
            targets.sample(&mut seen, true);
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(INTERVAL);
                targets.sample(&mut seen, false);
            }
            let mut out = BTreeMap::new();
            for s in seen.values() {
                let secs = s.last.saturating_sub(s.first) as f64 / TICKS_PER_SECOND;
                *out.entry(s.label.to_owned()).or_insert(0.0) += secs;
            }
            out
        });
        Self { stop, thread }
    }

    /// Takes a last sample and returns CPU seconds per label over the window.
    pub fn stop(self) -> BTreeMap<String, f64> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn postgres_titles() {
        let pg = Postgres {
            postmaster: 1,
            database: "t_abc".into(),
        };
        let l = |t: &str| pg.label(t);
        assert_eq!(
            l("postgres: 15/main: actiond_test_api t_abc 127.0.0.1(5000) idle"),
            Some("postgres")
        );
        assert_eq!(l("postgres: autovacuum worker t_abc"), Some("postgres"));
        assert_eq!(
            l("postgres: 15/main: postgres t_other 127.0.0.1(5001) idle"),
            None
        );
        assert_eq!(l("postgres: 15/main: walwriter"), Some("postgres-aux"));
        assert_eq!(l("postgres: checkpointer"), Some("postgres-aux"));
    }

    #[test]
    fn meters_own_process() {
        let me = std::process::id();
        let m = Meter::start(vec![("bench client", me)], None);
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed() < Duration::from_millis(300) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        let cpu = m.stop();
        assert!(x > 0);
        assert!(
            cpu.get("bench client").copied().unwrap_or_default() > 0.05,
            "{cpu:?}"
        );
    }
}
