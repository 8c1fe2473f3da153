//! The run's figures as text (default) or as one JSON line (`--json`).

use crate::floor::Floor;
use crate::load::Submitted;
use crate::pgss::{Profile, Statement};
use crate::stages::{Dist, Stages, round};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Components in print order; CPU times of other labels are never produced.
const COMPONENTS: &[&str] = &[
    "api",
    "policy",
    "executor",
    "sealer",
    "postgres",
    "postgres-aux",
    "bench client",
    "bench backend",
];

/// Everything one run measured.
pub struct Run {
    /// `allow` or `submit`.
    pub scenario: String,
    /// `closed loop, N clients` or `open loop, R/s`.
    pub mode: String,
    /// Open-loop target arrival rate (proposals/s), if open loop.
    pub rate: Option<f64>,
    /// Proposals measured (warm-up excluded).
    pub proposals: usize,
    /// API processes.
    pub apis: usize,
    /// Policy worker processes.
    pub policies: usize,
    /// Executor processes.
    pub executors: usize,
    /// The agents' side.
    pub submitted: Submitted,
    /// Seconds from the first arrival until every proposal succeeded (allow scenario).
    pub e2e_seconds: Option<f64>,
    /// CPU seconds per component over the window.
    pub cpu: BTreeMap<String, f64>,
    /// Stage latencies from the audit log.
    pub stages: Stages,
    /// The floor, or why it was not measured; `None` when skipped (`--floor-seconds 0`).
    pub floor: Option<Result<Floor, String>>,
    /// The statement profile, or why there is none; `None` when not asked for.
    pub statements: Option<Result<Profile, String>>,
    /// What the run did to `proposals`, from `pg_stat_user_tables`; `None` when not readable.
    pub activity: Option<TableActivity>,
    /// The tables read by sequential scans during the run, most rows read first.
    pub seq_scanned: Vec<SeqScans>,
    /// The tables autovacuum vacuumed or analyzed during the run.
    pub maintained: Vec<Maintenance>,
    /// WAL segment files `pg_wal` gained during the run, `None` when not readable
    /// ([`wal_line`]).
    pub wal_segments_added: Option<i64>,
    /// Finished proposals stored before the run (`--history`).
    pub history: u32,
}

/// A table's sequential scans over the run (`pg_stat_user_tables`).
#[derive(Clone, Debug, PartialEq)]
pub struct SeqScans {
    /// The table's name.
    pub table: String,
    /// Sequential scans started.
    pub scans: i64,
    /// Rows those scans read.
    pub rows_read: i64,
}

impl SeqScans {
    /// The tables whose scans read rows between `before` and `after` (each a map of table
    /// name to cumulative scans and rows read), most rows read first. A scan of a table
    /// with no rows, or one that `before` did not know, reads nothing worth reporting.
    pub fn since(
        before: &BTreeMap<String, (i64, i64)>,
        after: &BTreeMap<String, (i64, i64)>,
    ) -> Vec<Self> {
        let mut out: Vec<Self> = deltas(before, after)
            .filter(|&(_, _, rows)| rows > 0)
            .map(|(table, scans, rows_read)| Self {
                table,
                scans,
                rows_read,
            })
            .collect();
        out.sort_by(|a, b| b.rows_read.cmp(&a.rows_read).then(a.table.cmp(&b.table)));
        out
    }
}

/// A table's autovacuum and autoanalyze runs over the run (`pg_stat_user_tables`). An
/// autoanalyze invalidates every connection's cached plans that read the table, so each
/// plans its statements again on their next execution: all at once, a burst of planning.
#[derive(Clone, Debug, PartialEq)]
pub struct Maintenance {
    /// The table's name.
    pub table: String,
    /// Autovacuum runs.
    pub vacuums: i64,
    /// Autoanalyze runs.
    pub analyzes: i64,
}

impl Maintenance {
    /// The tables autovacuum vacuumed or analyzed between `before` and `after` (each a map
    /// of table name to cumulative autovacuum and autoanalyze counts), by name.
    pub fn since(
        before: &BTreeMap<String, (i64, i64)>,
        after: &BTreeMap<String, (i64, i64)>,
    ) -> Vec<Self> {
        deltas(before, after)
            .filter(|&(_, v, a)| v > 0 || a > 0)
            .map(|(table, vacuums, analyzes)| Self {
                table,
                vacuums,
                analyzes,
            })
            .collect()
    }
}

/// The report's line about WAL segments created during the run, when there were any.
///
/// A backend that needs a new WAL segment writes it in full (16 MiB of zeros with the default
/// `wal_init_zero = on`) and syncs it while holding the WAL write lock, so every commit waits
/// for it: about 150 ms a segment on this machine's disk, one stall per 16 MiB of WAL. A
/// segment recycled by a checkpoint costs nothing, and a server in service keeps enough for
/// its load; a fresh cluster, or one whose `wal_keep_size` or replication slots hold old
/// segments, creates them as it goes, and the run's latency tails are then those stalls.
/// `added` is net (a checkpoint during the run may remove segments, or create some ahead of
/// time without a stall): a sign, not an exact count.
pub fn wal_line(added: Option<i64>) -> Option<String> {
    let n = added.filter(|&n| n > 0)?;
    Some(format!(
        "  pg_wal          {n} segment(s) created during the run; commits wait while each is written in full, so latency tails include those stalls (a cluster in service recycles segments: see bench/README.md)"
    ))
}

/// Per table of `after` that `before` knew, by name: the growth of its two counters.
fn deltas<'a>(
    before: &'a BTreeMap<String, (i64, i64)>,
    after: &'a BTreeMap<String, (i64, i64)>,
) -> impl Iterator<Item = (String, i64, i64)> + 'a {
    after.iter().filter_map(|(table, &(x, y))| {
        let &(x0, y0) = before.get(table)?;
        Some((table.clone(), x - x0, y - y0))
    })
}

/// A table's activity over the run (`pg_stat_user_tables`, differences of its counters).
#[derive(Debug, Clone, Copy)]
pub struct TableActivity {
    /// Rows updated.
    pub updates: i64,
    /// Of them, HOT updates (no index touched).
    pub hot_updates: i64,
    /// Sequential scans started.
    pub seq_scans: i64,
    /// Rows those scans read.
    pub seq_rows_read: i64,
}

impl TableActivity {
    /// The counters from `before` to `self`.
    pub fn since(&self, before: &Self) -> Self {
        Self {
            updates: self.updates - before.updates,
            hot_updates: self.hot_updates - before.hot_updates,
            seq_scans: self.seq_scans - before.seq_scans,
            seq_rows_read: self.seq_rows_read - before.seq_rows_read,
        }
    }
}

/// CPU milliseconds per proposal for each component present, in [`COMPONENTS`] order.
fn cpu_per_proposal(cpu: &BTreeMap<String, f64>, proposals: f64) -> Vec<(&'static str, f64)> {
    COMPONENTS
        .iter()
        .filter_map(|c| cpu.get(*c).map(|s| (*c, s * 1000.0 / proposals.max(1.0))))
        .collect()
}

fn cpu_text(cpu: &[(&str, f64)]) -> String {
    cpu.iter()
        .map(|(c, ms)| format!("{c} {ms:.3}"))
        .collect::<Vec<_>>()
        .join(" · ")
}

fn cpu_json(cpu: &[(&str, f64)]) -> Value {
    Value::Object(
        cpu.iter()
            .map(|(c, ms)| ((*c).to_owned(), json!(round(*ms, 4))))
            .collect(),
    )
}

fn dist_text(d: &Dist) -> String {
    format!(
        "p50 {:8.2} ms   p99 {:8.2} ms   max {:8.2} ms   (n {})",
        d.pct(0.5),
        d.pct(0.99),
        d.max(),
        d.ms.len()
    )
}

impl Run {
    /// Proposals per second end to end (allow) or submitted (submit scenario).
    pub fn per_second(&self) -> f64 {
        let secs = self.e2e_seconds.unwrap_or(self.submitted.seconds);
        self.proposals as f64 / secs.max(f64::EPSILON)
    }

    fn floor_ok(&self) -> Option<&Floor> {
        self.floor.as_ref().and_then(|f| f.as_ref().ok())
    }

    /// actiond proposals/s ÷ floor proposals/s, when both were measured.
    pub fn ratio(&self) -> Option<f64> {
        self.floor_ok().map(|f| self.per_second() / f.per_second)
    }

    /// The human-readable report.
    pub fn text(&self) -> String {
        let mut o = String::new();
        let mut line = |s: String| {
            o.push_str(&s);
            o.push('\n');
        };
        match &self.floor {
            Some(Ok(f)) => {
                line(format!(
                    "floor             {:.0} proposals/s (pgbench, minimal schema, {} clients, {} s, {} proposals)",
                    f.per_second, f.clients, f.seconds, f.proposals
                ));
                let cpu = cpu_per_proposal(&f.cpu, f.proposals as f64);
                line(format!("  CPU ms/proposal {}", cpu_text(&cpu)));
            }
            Some(Err(e)) => line(format!("floor             not measured: {e}")),
            None => line("floor             skipped (--floor-seconds 0)".into()),
        }
        line(format!(
            "actiond           scenario {}, {}, {} proposals; {} api, {} policy, {} executor processes",
            self.scenario, self.mode, self.proposals, self.apis, self.policies, self.executors
        ));
        let s = &self.submitted;
        line(format!(
            "  submitted       {:.0} proposals/s{}",
            self.proposals as f64 / s.seconds.max(f64::EPSILON),
            self.rate
                .map(|r| format!(" (target arrival rate {r:.0}/s)"))
                .unwrap_or_default()
        ));
        line(format!(
            "  submit latency  {}",
            dist_text(&Dist::new(s.latency_ms.clone()))
        ));
        if self.e2e_seconds.is_some() {
            line(format!(
                "  allow path      {:.0} proposals/s end to end (submitted, decided, signed, spent, executed, recorded)",
                self.per_second()
            ));
        }
        if let Some(r) = self.ratio() {
            line(format!("ratio             {r:.3} × floor"));
        }
        let cpu = cpu_per_proposal(&self.cpu, self.proposals as f64);
        line(format!("  CPU ms/proposal {}", cpu_text(&cpu)));
        if self.stages.iter().any(|(_, d)| !d.ms.is_empty()) {
            line("  stages (audit events, database clock):".into());
            for (name, d) in &self.stages {
                line(format!("    {name:<18} {}", dist_text(d)));
            }
        }
        if let Some(a) = self.activity {
            line(format!(
                "  proposals rows  {} updates, {} of them HOT ({:.0}%); {} sequential scans reading {} rows (pg_stat_user_tables; {} finished proposals stored before the run)",
                a.updates,
                a.hot_updates,
                a.hot_updates as f64 * 100.0 / (a.updates.max(1) as f64),
                a.seq_scans,
                a.seq_rows_read,
                self.history,
            ));
        }
        if !self.seq_scanned.is_empty() {
            let tables: Vec<String> = self
                .seq_scanned
                .iter()
                .map(|t| format!("{} {} reading {} rows", t.table, t.scans, t.rows_read))
                .collect();
            line(format!("  seq scans       {}", tables.join(" · ")));
        }
        if !self.maintained.is_empty() {
            let tables: Vec<String> = self
                .maintained
                .iter()
                .map(|t| format!("{} ({} vacuum, {} analyze)", t.table, t.vacuums, t.analyzes))
                .collect();
            line(format!(
                "  autovacuum      {} (each analyze makes every connection plan again)",
                tables.join(" · ")
            ));
        }
        if let Some(l) = wal_line(self.wal_segments_added) {
            line(l);
        }
        self.statements_text(&mut line);
        o
    }

    fn statements_text(&self, line: &mut impl FnMut(String)) {
        match &self.statements {
            None => {}
            Some(Err(e)) => line(format!("  statements      not available: {e}")),
            Some(Ok(p)) => {
                let n = self.proposals.max(1) as f64;
                line(format!(
                    "  statements      {:.2} per proposal, {:.3} ms of statement time per proposal (the services' own, BEGIN and COMMIT included)",
                    p.calls as f64 / n,
                    p.total_ms / n
                ));
                let st = &p.top;
                line("  statements (pg_stat_statements, by total time):".into());
                line(format!(
                    "    {:>6} {:>8} {:>9}  statement",
                    "share", "calls", "mean ms"
                ));
                for s in st {
                    line(format!(
                        "    {:>5.1}% {:>8} {:>9.3}  {}",
                        s.share * 100.0,
                        s.calls,
                        s.mean_ms,
                        s.query
                    ));
                }
            }
        }
    }

    /// The machine-readable report: one JSON object.
    pub fn json(&self) -> Value {
        let floor = match &self.floor {
            Some(Ok(f)) => json!({
                "per_second": round(f.per_second, 1),
                "proposals": f.proposals,
                "clients": f.clients,
                "seconds": f.seconds,
                "cpu_ms_per_proposal": cpu_json(&cpu_per_proposal(&f.cpu, f.proposals as f64)),
            }),
            Some(Err(e)) => json!({"error": e}),
            None => Value::Null,
        };
        let stages: serde_json::Map<String, Value> = self
            .stages
            .iter()
            .map(|(n, d)| ((*n).to_owned(), d.json()))
            .collect();
        let n = self.proposals.max(1) as f64;
        let statements = match &self.statements {
            Some(Ok(p)) => json!({
                "per_proposal": round(p.calls as f64 / n, 2),
                "ms_per_proposal": round(p.total_ms / n, 3),
                "top": p.top.iter().map(Statement::json).collect::<Vec<_>>(),
            }),
            Some(Err(e)) => json!({"error": e}),
            None => Value::Null,
        };
        json!({
            "scenario": self.scenario,
            "mode": self.mode,
            "rate": self.rate,
            "proposals": self.proposals,
            "apis": self.apis,
            "policies": self.policies,
            "executors": self.executors,
            "floor": floor,
            "submitted_per_second": round(self.proposals as f64 / self.submitted.seconds.max(f64::EPSILON), 1),
            "submit_latency": Dist::new(self.submitted.latency_ms.clone()).json(),
            "per_second": round(self.per_second(), 1),
            "ratio": self.ratio().map(|r| round(r, 4)),
            "cpu_ms_per_proposal": cpu_json(&cpu_per_proposal(&self.cpu, self.proposals as f64)),
            "stages": stages,
            "statements": statements,
            "proposal_updates": self.activity.map(|a| json!({"all": a.updates, "hot": a.hot_updates})),
            "proposal_seq_scans": self.activity.map(|a| json!({"scans": a.seq_scans, "rows_read": a.seq_rows_read})),
            "autovacuum": self.maintained.iter().map(|t| json!({"table": t.table, "vacuums": t.vacuums, "analyzes": t.analyzes})).collect::<Vec<_>>(),
            "wal_segments_added": self.wal_segments_added,
            "seq_scanned": self.seq_scanned.iter().map(|t| json!({"table": t.table, "scans": t.scans, "rows_read": t.rows_read})).collect::<Vec<_>>(),
            "history": self.history,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The WAL line appears only when segments were created during the run.
    #[test]
    fn wal_segments_created_during_the_run_are_reported() {
        assert_eq!(wal_line(None), None);
        assert_eq!(wal_line(Some(0)), None);
        assert_eq!(wal_line(Some(-3)), None, "a checkpoint removed segments");
        let line = wal_line(Some(3)).unwrap();
        assert!(
            line.contains("3 segment(s) created during the run"),
            "{line}"
        );
    }

    /// Only tables whose scans read rows over the run are reported, most rows first; a
    /// table the first reading did not see is not.
    #[test]
    fn seq_scans_report_the_tables_read_over_the_run() {
        let m = |v: &[(&str, i64, i64)]| -> BTreeMap<String, (i64, i64)> {
            v.iter().map(|&(t, s, r)| (t.to_owned(), (s, r))).collect()
        };
        let before = m(&[("grants", 10, 100), ("agents", 5, 5), ("idle", 3, 30)]);
        let after = m(&[
            ("grants", 3598, 12_900_951),
            ("agents", 41_514, 41_514),
            ("idle", 9, 30),
            ("new", 2, 7),
        ]);
        let got = SeqScans::since(&before, &after);
        let names: Vec<_> = got.iter().map(|t| t.table.as_str()).collect();
        assert_eq!(names, ["grants", "agents"]);
        let m = Maintenance::since(&before, &after);
        let names: Vec<_> = m.iter().map(|t| t.table.as_str()).collect();
        assert_eq!(
            names,
            ["agents", "grants", "idle"],
            "every table that changed"
        );
        assert_eq!(
            got[0],
            SeqScans {
                table: "grants".into(),
                scans: 3588,
                rows_read: 12_900_851
            }
        );
    }
}
