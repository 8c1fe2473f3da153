//! `actiond audit`: the sealer, offline verification, SIEM export, the retention purge and the
//! sealer's key.
//!
//! - `seal [--once] [--state-dir D] [--sink F]`: the sealer (its own role `actiond_sealer`,
//!   its own Ed25519 key `audit_seal_key` from its credentials directory, each tenant's newest
//!   seal kept in its state directory). One works at a time; others stand by.
//! - `verify --public-key K [--from-file F] [--anchor T:SEQ:HEAD]… [--anchors-from F]…`:
//!   recomputes every chain and seal, and checks each head recorded earlier is still there;
//!   exit 1 naming the first event, seal, file line or anchor that differs.
//! - `verify-passkeys`: re-verifies every passkey-signed approval from the stored assertion
//!   and public key alone (challenge recomputed from the intent, signature, evidence hash in
//!   the approval's audit event); exit 1 naming the first proposal and field that fail.
//! - `export --since T [--tenant T] [--follow] [--format jsonl|cloudevents]`: sealed events, one
//!   per line, on stdout.
//! - `purge [--decided-after 30d]`: the retention purge (role `actiond_retention`).
//! - `keygen --out-dir D`: a sealer key pair.

use crate::admin::{DbArgs, write_secret};
use crate::seal_state::{HEADS_FILE, StateDir, anchors, append_to_sink};
use actiond_core::audit_chain::{ChainItem, Location, SealSigner, Verifier, generate_seal_key};
use actiond_core::audit_export::{Format, Record, parse_line};
use actiond_core::audit_head::Anchor;
use actiond_core::ids::parse_duration;
use actiond_runtime::credentials::CredentialsDir;
use actiond_runtime::{Metrics, Running, Service, Stop, say};
use actiond_store::Db;
use actiond_store::audit_export::{Export, ExportOptions};
use actiond_store::seals::Sealer;
use anyhow::{Context, bail};
use std::io::BufRead as _;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Name of the sealer's key in its credentials directory.
pub const SEAL_KEY_CREDENTIAL: &str = "audit_seal_key";

/// `actiond audit …`.
#[derive(Debug, clap::Subcommand)]
pub enum AuditCmd {
    /// Run the sealer: chain and sign unsealed audit events.
    Seal(SealArgs),
    /// Verify every chain and seal with the sealer's public key (database or export file).
    Verify(VerifyArgs),
    /// Re-verify every passkey-signed approval (WebAuthn assertion over the intent).
    VerifyPasskeys(VerifyPasskeysArgs),
    /// Write sealed audit events as JSON Lines or CloudEvents 1.0 on stdout.
    Export(ExportArgs),
    /// Purge params, source text and reasons of decided proposals past their retention.
    Purge(PurgeArgs),
    /// Generate the sealer's Ed25519 key pair.
    Keygen(AuditKeygenArgs),
}

/// `actiond audit seal`.
#[derive(Debug, clap::Args)]
pub struct SealArgs {
    #[command(flatten)]
    db: DbArgs,
    /// Directory holding `audit_seal_key` (default: `$CREDENTIALS_DIRECTORY`).
    #[arg(long, env = "ACTIOND_SEALER_CREDENTIALS_DIR")]
    credentials_dir: Option<PathBuf>,
    /// Key id written into seals.
    #[arg(long, env = "ACTIOND_SEALER_KEY_ID", default_value = "sealer-1")]
    key_id: String,
    /// Seal what is final now and exit (waits up to --wait for running transactions).
    #[arg(long)]
    once: bool,
    /// With --once: how long to wait for transactions running now to end (`30s`, `2m`, or a
    /// number of seconds; at most 1h).
    #[arg(long, default_value = "30s", value_parser = crate::args::wait, allow_negative_numbers = true)]
    wait: Duration,
    /// Time between sealing rounds.
    #[arg(long, env = "ACTIOND_SEALER_INTERVAL", default_value = "5s", value_parser = parse_duration)]
    interval: Duration,
    /// Most events per seal transaction.
    #[arg(long, default_value_t = 5000)]
    batch: i64,
    /// Metrics listener (`/metrics`, `/healthz`, `/readyz`); none when absent.
    #[arg(long, env = "ACTIOND_SEALER_ADMIN_LISTEN")]
    admin_listen: Option<SocketAddr>,
    /// The sealer's own state directory, outside the database (default: `$STATE_DIRECTORY`,
    /// as systemd's `StateDirectory=` sets it). It keeps each tenant's newest seal; the sealer
    /// refuses to extend a chain that does not continue it. Without one the chain's head
    /// lives only in the database, whose owner can then delete the newest seals unnoticed by
    /// the sealer.
    #[arg(long, env = "ACTIOND_SEALER_STATE_DIR")]
    state_dir: Option<PathBuf>,
    /// When the state directory has no state yet but the database holds seals: check every
    /// chain from seal 1 with the sealer's key and keep its newest seal. Once, when the state
    /// directory is first set up (run `actiond audit verify` with the anchors you kept first).
    #[arg(long, env = "ACTIOND_SEALER_ADOPT_HEADS")]
    adopt_heads: bool,
    /// Append every seal written to this file, one JSON line each (`{"record":"seal",…}`),
    /// synced: a copy of the chain's heads outside the database for a SIEM to collect.
    #[arg(long, env = "ACTIOND_SEALER_SINK")]
    sink: Option<PathBuf>,
}

/// `actiond audit verify`.
#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    /// Postgres URL (an `actiond_auditor` login); not needed with --from-file.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    database_url: Option<String>,
    /// The sealer's public key: a file holding it, or the base64 key itself.
    #[arg(long)]
    public_key: String,
    /// Verify an export file instead of the database.
    #[arg(long)]
    from_file: Option<PathBuf>,
    /// A head recorded earlier, `tenant:seq:head` (as `verify` prints under `heads` and the
    /// sealer logs): today's chain must still hold that seal with that head. Repeatable. Names
    /// a missing tenant, a truncated tail or a rewritten middle.
    #[arg(long = "anchor", value_name = "TENANT:SEQ:HEAD")]
    anchors: Vec<String>,
    /// A file of seals recorded earlier (the sealer's `--sink`, or an earlier `export`): every
    /// seal in it must be in today's chain unchanged (the earlier chain is a prefix of today's).
    #[arg(long, value_name = "FILE")]
    anchors_from: Vec<PathBuf>,
}

/// `actiond audit verify-passkeys`.
#[derive(Debug, clap::Args)]
pub struct VerifyPasskeysArgs {
    /// Postgres URL (an `actiond_auditor` login).
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    database_url: String,
}

/// `actiond audit export`.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    #[command(flatten)]
    db: DbArgs,
    /// Events at or after this time: a duration back from now (`1h`, `7d`) or an RFC 3339
    /// time with its offset (`2026-11-01T00:00:00Z`, `2026-11-01T01:00:00+01:00`). A time
    /// without an offset, `now`, `24:00`, a time in the future or more than 36500d ago is
    /// refused.
    #[arg(long, value_parser = crate::args::since)]
    since: chrono::DateTime<chrono::Utc>,
    /// Only this tenant.
    #[arg(long)]
    tenant: Option<String>,
    /// Keep running and write newly sealed events as they come.
    #[arg(long)]
    follow: bool,
    /// `jsonl` or `cloudevents`.
    #[arg(long, default_value = "jsonl")]
    format: String,
}

/// `actiond audit purge`.
#[derive(Debug, clap::Args)]
pub struct PurgeArgs {
    #[command(flatten)]
    db: DbArgs,
    /// Default for tenants whose document has no `retention.decided_after`: 1h to 36500d,
    /// the document's own bounds.
    #[arg(long, default_value = "30d", value_parser = parse_decided_after)]
    decided_after: Duration,
    /// Starting batch size, 1 to 10000 (adapts to keep each transaction well under a second).
    /// Before the bound, `0` never finished (a batch of 0 rows never ends the loop) and a
    /// negative one was a raw database error.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(i64).range(1..=10_000))]
    batch: i64,
    /// Run again after this long, forever; once when absent.
    #[arg(long, value_parser = parse_duration)]
    interval: Option<Duration>,
    /// Metrics listener; none when absent.
    #[arg(long, env = "ACTIOND_RETENTION_ADMIN_LISTEN")]
    admin_listen: Option<SocketAddr>,
}

/// `actiond audit keygen`.
#[derive(Debug, clap::Args)]
pub struct AuditKeygenArgs {
    /// Directory to write `audit_seal_key` (secret, 0600) and `<key_id>.pub` into.
    #[arg(long)]
    out_dir: PathBuf,
    /// Key id.
    #[arg(long, default_value = "sealer-1")]
    key_id: String,
}

/// Runs an `actiond audit` command.
pub async fn audit(cmd: AuditCmd) -> anyhow::Result<()> {
    match cmd {
        AuditCmd::Seal(a) => seal(a).await,
        AuditCmd::Verify(a) => verify(a).await,
        AuditCmd::VerifyPasskeys(a) => verify_passkeys(a).await,
        AuditCmd::Export(a) => export(a).await,
        AuditCmd::Purge(a) => purge(a).await,
        AuditCmd::Keygen(a) => keygen(a),
    }
}

/// `actiond dev`'s sealer: a key of its own in `<creds>/sealer` (public half
/// `<creds>/sealer-1.pub`, which dev's banner names in its `audit verify` line), its state in
/// `<creds>/sealer-state`, and
/// `actiond audit seal` as a child process with its own login, its metrics listener on a
/// free loopback port and its stderr piped (dev relays it and reads the port from it).
pub fn spawn_dev_sealer(
    exe: &std::path::Path,
    database_url: &str,
    creds: &std::path::Path,
) -> anyhow::Result<(&'static str, tokio::process::Child)> {
    let dir = creds.join("sealer");
    std::fs::create_dir_all(&dir)?;
    let (secret, public) = generate_seal_key()?;
    write_secret(&dir.join(SEAL_KEY_CREDENTIAL), &secret)?;
    let pub_path = creds.join("sealer-1.pub");
    std::fs::write(&pub_path, format!("{public}\n"))?;
    let child = tokio::process::Command::new(exe)
        .args(["audit", "seal", "--interval", "2s"])
        .env_remove("CREDENTIALS_DIRECTORY")
        .env("DATABASE_URL", database_url)
        .env("ACTIOND_SEALER_CREDENTIALS_DIR", &dir)
        .env("ACTIOND_SEALER_STATE_DIR", creds.join("sealer-state"))
        .env("ACTIOND_SEALER_ADMIN_LISTEN", "127.0.0.1:0")
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("cannot start actiond audit seal")?;
    Ok(("sealer", child))
}

fn keygen(a: AuditKeygenArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&a.out_dir)?;
    let (secret, public) = generate_seal_key()?;
    write_secret(&a.out_dir.join(SEAL_KEY_CREDENTIAL), &secret)?;
    std::fs::write(
        a.out_dir.join(format!("{}.pub", a.key_id)),
        format!("{public}\n"),
    )?;
    say(&format!(
        "wrote {0}/{SEAL_KEY_CREDENTIAL} (secret, 0600: the sealer's credential) and {0}/{1}.pub (give it to whoever verifies)",
        a.out_dir.display(),
        a.key_id
    ));
    Ok(())
}

struct SealMetrics {
    metrics: Metrics,
    refused: prometheus::GaugeVec,
    lag: prometheus::GaugeVec,
    unsealed: prometheus::GaugeVec,
    seals: prometheus::IntCounterVec,
    events: prometheus::IntCounterVec,
    misdated: prometheus::IntCounterVec,
}

fn seal_metrics() -> SealMetrics {
    let metrics = Metrics::new("sealer");
    let m = SealMetrics {
        lag: metrics.gauge_vec(
            "audit_seal_lag_seconds",
            "Age of the oldest audit event not sealed yet (0 when all are sealed).",
            &[],
        ),
        unsealed: metrics.gauge_vec("audit_unsealed_events", "Audit events not sealed yet.", &[]),
        seals: metrics.counter_vec("audit_seals_total", "Seal rows written.", &[]),
        events: metrics.counter_vec("audit_sealed_events_total", "Audit events sealed.", &[]),
        misdated: metrics.counter_vec(
            "audit_misdated_events_total",
            "Audit events sealed whose time does not hold: more than 60 s before the event before them in their tenant's chain (back-dated), or after the seal (dated ahead). Only the database owner writes such a time, or a database clock set back.",
            &[],
        ),
        refused: metrics.gauge_vec(
            "audit_seal_refused",
            "1 while the sealer refuses to seal because the database's chain does not continue the head it keeps in its own state (truncated tail, deleted tenant, rewritten or forged seal); 0 otherwise.",
            &[],
        ),
        metrics,
    };
    // Label-less counters exist at 0 from the first scrape, not from the first seal.
    m.seals.with_label_values::<&str>(&[]);
    m.events.with_label_values::<&str>(&[]);
    m.misdated.with_label_values::<&str>(&[]);
    m
}

/// The [`Service`] of a database worker (`sealer`, `retention`): its metrics, a ready check
/// that pings Postgres, and the admin listener when `--admin-listen` is given.
fn db_service(
    role: &'static str,
    metrics: &Metrics,
    db: &Db,
    admin: Option<SocketAddr>,
) -> Service {
    let ready_db = db.clone();
    Service::with_metrics(role, metrics.clone())
        .admin(admin)
        .ready(move || {
            let db = ready_db.clone();
            async move { db.readiness().await }
        })
}

/// Starts `service`, logging its admin listener's address when it has one.
async fn start(service: Service) -> anyhow::Result<Running> {
    let running = service.start().await?;
    if let Some(bound) = running.admin_addr() {
        tracing::info!(admin = %bound, "metrics listener started");
    }
    Ok(running)
}

async fn seal(a: SealArgs) -> anyhow::Result<()> {
    let creds = CredentialsDir::resolve(a.credentials_dir.as_deref())?;
    let key = creds.read(SEAL_KEY_CREDENTIAL)?;
    let state = state_dir(&a)?;
    let db = Db::connect(&a.db.database_url, 2)?;
    let m = seal_metrics();
    let (lag, unsealed, sdb) = (m.lag.clone(), m.unsealed.clone(), db.clone());
    let service = db_service("sealer", &m.metrics, &db, a.admin_listen).on_scrape(move || {
        let (lag, unsealed, db) = (lag.clone(), unsealed.clone(), sdb.clone());
        async move {
            if let Ok((age, n)) = actiond_store::seals::lag(&db).await {
                lag.with_label_values(&[] as &[&str]).set(age);
                unsealed.with_label_values(&[] as &[&str]).set(n as f64);
            }
        }
    });
    start(service)
        .await?
        .run_worker(|stop| sealing(a, key, state, db, m, stop))
        .await
}

/// The sealer's work until `stop`: rounds every `--interval` while it holds the lock, standing
/// by while another sealer holds it.
async fn sealing(
    a: SealArgs,
    key: String,
    state: Option<StateDir>,
    db: Db,
    m: SealMetrics,
    mut stop: Stop,
) -> anyhow::Result<()> {
    let stop = stop.wait();
    tokio::pin!(stop);
    // A lost database connection (Postgres restarted, the backend terminated) ends a round,
    // never the sealer: it lets the lock go with the connection, takes it again (or stands by
    // if another sealer took it meanwhile) and resumes from what is sealed.
    let mut worked = false;
    loop {
        let mut sealer = loop {
            let signer = SealSigner::from_pkcs8_b64(&a.key_id, &key)?;
            match Sealer::try_acquire(&db, signer).await {
                Ok(Some(s)) => break s,
                Ok(None) if a.once => {
                    say("another sealer is working; nothing done");
                    return Ok(());
                }
                Ok(None) => tracing::info!("another sealer holds the lock; standing by"),
                Err(e) if worked => {
                    tracing::warn!(error = %e, "cannot take the sealer lock; trying again");
                }
                Err(e) => return Err(e.into()),
            }
            tokio::select! {
                () = actiond_runtime::clock::sleep(a.interval) => {}
                () = &mut stop => return Ok(()),
            }
        };
        tracing::info!(key_id = %a.key_id, "sealer working");
        let mut kept = Kept {
            state: state.clone(),
            loaded: false,
        };
        if a.once {
            return seal_once(&mut sealer, &mut kept, &a, &m).await;
        }
        worked = true;
        let mut tick = tokio::time::interval(a.interval);
        let failed = loop {
            tokio::select! {
                _ = tick.tick() => {}
                () = &mut stop => return Ok(()),
            }
            if let Err(e) = seal_round(&mut sealer, &mut kept, &a, &m).await {
                break e;
            }
        };
        drop(sealer);
        tracing::warn!(error = %failed, "sealing round failed; the lock went with its connection, taking it again");
        tokio::select! {
            () = actiond_runtime::clock::sleep(a.interval) => {}
            () = &mut stop => return Ok(()),
        }
    }
}

/// `--state-dir`, else systemd's `$STATE_DIRECTORY` (its first entry), else none (warned).
fn state_dir(a: &SealArgs) -> anyhow::Result<Option<StateDir>> {
    let dir = a.state_dir.clone().or_else(|| {
        std::env::var_os("STATE_DIRECTORY")
            .and_then(|v| std::env::split_paths(&v).next())
            .filter(|p| !p.as_os_str().is_empty())
    });
    match dir {
        Some(d) => Ok(Some(StateDir::open(&d)?)),
        None => {
            tracing::warn!(
                "no --state-dir: the chain's head lives only in the database, whose owner can delete the newest seals without the sealer noticing"
            );
            Ok(None)
        }
    }
}

/// The sealer's state for one working spell: loaded (again) each time the lock is taken, so
/// a failed round never leaves memory ahead of what is saved.
struct Kept {
    state: Option<StateDir>,
    loaded: bool,
}

/// Before a round: the kept heads loaded (or adopted, or started empty on a database without
/// seals) and checked against the database. Returns the refusals, one line per tenant whose
/// chain does not continue its head; empty to go on. Seals found past the kept heads (the
/// sealer's own, committed before a crash or by another replica) are saved and sent to the
/// sink.
async fn check_chain(
    sealer: &mut Sealer,
    kept: &mut Kept,
    a: &SealArgs,
) -> anyhow::Result<Vec<String>> {
    let Some(state) = &kept.state else {
        return Ok(Vec::new());
    };
    if !kept.loaded {
        match state.load()? {
            Some(h) => sealer.keep_heads(h),
            None if !sealer.any_seal().await? => sealer.keep_heads(Default::default()),
            None if a.adopt_heads => {
                if let Err(e) = sealer.adopt_heads().await? {
                    return Ok(vec![format!("cannot adopt the database's heads: {e}")]);
                }
            }
            None => {
                return Ok(vec![format!(
                    "the state directory has no {HEADS_FILE} but the database holds seals: \
                     check them with `actiond audit verify` and the anchors you kept, then start \
                     the sealer once with --adopt-heads"
                )]);
            }
        }
        kept.loaded = true;
    }
    let refused = sealer.check_heads().await?;
    if refused.is_empty() {
        save(sealer, kept, a)?;
    }
    Ok(refused)
}

/// Sends new seals to the sink, then saves the kept heads (in that order: a crash between the
/// two appends a seal twice, never drops one from the sink).
fn save(sealer: &mut Sealer, kept: &Kept, a: &SealArgs) -> anyhow::Result<()> {
    let written = sealer.take_written();
    if let Some(sink) = &a.sink {
        append_to_sink(sink, &written)?;
    }
    if let (Some(state), Some(heads)) = (&kept.state, sealer.take_changed_heads()) {
        state.save(&heads)?;
        tracing::debug!(heads = ?anchors(&heads), "heads kept");
    }
    Ok(())
}

/// Sets the refusal gauge and logs each refusal; true when refused.
fn refuse(m: &SealMetrics, refused: &[String]) -> bool {
    let g = m.refused.with_label_values(&[] as &[&str]);
    g.set(if refused.is_empty() { 0.0 } else { 1.0 });
    for r in refused {
        tracing::error!(refusal = %r, "refusing to seal: the database's audit chain does not continue the head the sealer kept");
    }
    !refused.is_empty()
}

/// Counts and logs the sealed events whose times do not hold (sealed as they are: the chain
/// keeps the evidence, and `audit verify` names them).
fn misdated(m: &SealMetrics, r: &actiond_store::seals::SealReport) {
    m.misdated
        .with_label_values(&[] as &[&str])
        .inc_by(r.misdated.len() as u64);
    for what in &r.misdated {
        tracing::error!(event = %what, "sealed an audit event whose time does not hold");
    }
}

/// One sealing round: seals every event that is final now, in batches of `--batch`, unless the
/// database's chain does not continue the kept heads (then nothing is sealed, the gauge is 1).
///
/// Errors: the store's (a lost connection included); nothing half-sealed stays, each seal is
/// one transaction.
async fn seal_round(
    sealer: &mut Sealer,
    kept: &mut Kept,
    a: &SealArgs,
    m: &SealMetrics,
) -> anyhow::Result<()> {
    if refuse(m, &check_chain(sealer, kept, a).await?) {
        return Ok(());
    }
    sealer.checkpoint().await?;
    if let Some(bound) = sealer.final_bound().await? {
        let r = sealer.seal_through(bound, a.batch).await;
        save(sealer, kept, a)?;
        let r = r?;
        m.seals.with_label_values(&[] as &[&str]).inc_by(r.seals);
        m.events.with_label_values(&[] as &[&str]).inc_by(r.events);
        misdated(m, &r);
        if r.events > 0 {
            tracing::info!(
                seals = r.seals,
                events = r.events,
                through = r.sealed_through,
                "sealed"
            );
        }
    }
    Ok(())
}

async fn seal_once(
    sealer: &mut Sealer,
    kept: &mut Kept,
    a: &SealArgs,
    m: &SealMetrics,
) -> anyhow::Result<()> {
    let refused = check_chain(sealer, kept, a).await?;
    if refuse(m, &refused) {
        bail!(
            "refused to seal: the database's audit chain does not continue the head the sealer kept: {}",
            refused.join("; ")
        );
    }
    sealer.checkpoint().await?;
    let deadline = tokio::time::Instant::now() + a.wait;
    let bound = loop {
        if let Some(b) = sealer.final_bound().await? {
            break Some(b);
        }
        if tokio::time::Instant::now() >= deadline {
            break None;
        }
        actiond_runtime::clock::sleep(Duration::from_millis(20)).await;
    };
    let Some(bound) = bound else {
        say(
            r#"{"seals":0,"events":0,"waiting":"a transaction that may hold an event id is still running"}"#,
        );
        return Ok(());
    };
    let r = sealer.seal_through(bound, a.batch).await;
    save(sealer, kept, a)?;
    let r = r?;
    m.seals.with_label_values(&[] as &[&str]).inc_by(r.seals);
    misdated(m, &r);
    say(&serde_json::to_string(&r)?);
    Ok(())
}

/// The role of the read-only login that `verify`, `verify-passkeys` and `export` need.
const AUDITOR: &str = "actiond_auditor";

/// `e`, or, when Postgres refused this login a privilege (SQLSTATE 42501: the operator's
/// `actiond_admin` login may not read the seals), one line naming the command and the role
/// whose login it needs, with what was refused. Exit 1, like any refusal.
fn needs_role(cmd: &str, role: &str, e: actiond_store::StoreError) -> anyhow::Error {
    if e.sqlstate() != Some("42501") {
        return e.into();
    }
    anyhow::anyhow!(
        "actiond audit {cmd} needs DATABASE_URL to be a login of role {role}, and this one was refused ({})",
        e.detail()
    )
}

/// `--public-key`: the contents of the file `arg` names, else `arg` itself as the base64 key.
/// An `arg` that names no file and is not a key either but reads as a path (it holds a `.` or
/// a `/`) is a mistyped path: "no such file", exit 3, where its characters were decoded as a
/// key ("must be 32 bytes", exit 2).
pub(crate) fn read_public_key(arg: &str) -> anyhow::Result<String> {
    let p = std::path::Path::new(arg);
    if p.exists() {
        return Ok(std::fs::read_to_string(p)
            .with_context(|| format!("cannot read {}", p.display()))?
            .trim()
            .to_owned());
    }
    let key = arg.trim();
    if Verifier::new(key, false).is_err() && (key.contains('.') || key.contains('/')) {
        return Err(crate::exit::not_found(format!(
            "--public-key: {arg}: no such file (nor is it a base64 Ed25519 public key)"
        )));
    }
    Ok(key.to_owned())
}

async fn verify(a: VerifyArgs) -> anyhow::Result<()> {
    let key = read_public_key(&a.public_key)?;
    // A key that is not one is invalid input (exit 2), not a failed verification (exit 1).
    Verifier::new(&key, false).map_err(|e| crate::exit::invalid(format!("--public-key: {e}")))?;
    let anchors = read_anchors(&a)?;
    if let Some(f) = &a.from_file {
        return verify_file(f, &key, &anchors);
    }
    let Some(url) = &a.database_url else {
        return Err(crate::exit::invalid(
            "actiond audit verify needs DATABASE_URL or --from-file",
        ));
    };
    let db = Db::connect(url, 2)?;
    let verified = actiond_store::audit_export::verify_db(&db, &key, &anchors)
        .await
        .map_err(|e| needs_role("verify", AUDITOR, e))?;
    match verified {
        Ok(v) => {
            say(&serde_json::to_string(&serde_json::json!({
                "verified": true, "seals": v.seals, "events": v.events, "unsealed": v.unsealed,
                "anchors": anchors.len(), "heads": v.heads,
            }))?);
            Ok(())
        }
        Err(m) => bail!("audit verification failed: {m}"),
    }
}

/// `--anchor` values and every seal of each `--anchors-from` file (JSON lines of an export or
/// the sealer's sink; event lines are skipped). A malformed one is invalid input (exit 2)
/// naming the value or the file line.
fn read_anchors(a: &VerifyArgs) -> anyhow::Result<Vec<Anchor>> {
    let mut out = Vec::new();
    for s in &a.anchors {
        out.push(Anchor::parse(s).map_err(|e| crate::exit::invalid(format!("--anchor {e}")))?);
    }
    for f in &a.anchors_from {
        for (i, line) in open_lines(f)?.enumerate() {
            let line = line.with_context(|| format!("cannot read {}", f.display()))?;
            let bad = |e: String| {
                crate::exit::invalid(format!(
                    "--anchors-from {} line {}: {e}",
                    f.display(),
                    i + 1
                ))
            };
            if let Record::Seal(s) = parse_line(&line).map_err(bad)? {
                out.push(Anchor::of_seal(&s.payload).map_err(bad)?);
            }
        }
    }
    Ok(out)
}

/// `actiond audit verify-passkeys`: one JSON line with the count, or exit 1 naming every
/// approval whose stored assertion does not verify.
async fn verify_passkeys(a: VerifyPasskeysArgs) -> anyhow::Result<()> {
    let db = Db::connect(&a.database_url, 2)?;
    let (checked, findings) = actiond_store::passkeys::verify_all(&db)
        .await
        .map_err(|e| needs_role("verify-passkeys", AUDITOR, e))?;
    if findings.is_empty() {
        say(&serde_json::to_string(
            &serde_json::json!({"verified": true, "passkey_approvals": checked}),
        )?);
        return Ok(());
    }
    let lines: Vec<String> = findings
        .iter()
        .map(|f| {
            format!(
                "proposal {} approved by {}: {}",
                f.proposal_id, f.subject, f.problem
            )
        })
        .collect();
    bail!(
        "passkey verification failed for {} of {checked} approvals: {}",
        findings.len(),
        lines.join("; ")
    )
}

fn open_lines(
    f: &std::path::Path,
) -> anyhow::Result<std::io::Lines<std::io::BufReader<std::fs::File>>> {
    let file = std::fs::File::open(f).with_context(|| format!("cannot open {}", f.display()))?;
    Ok(std::io::BufReader::new(file).lines())
}

/// Two passes over the file: seals first, then events. Memory grows with seals only.
fn verify_file(f: &std::path::Path, key: &str, anchors: &[Anchor]) -> anyhow::Result<()> {
    let mut v = Verifier::new(key, false)?;
    let fail =
        |m: actiond_core::audit_chain::Mismatch| anyhow::anyhow!("audit verification failed: {m}");
    for (i, line) in open_lines(f)?.enumerate() {
        let at = Location::Line(i as u64 + 1);
        let rec = parse_line(&line?)
            .map_err(|e| anyhow::anyhow!("audit verification failed: {at}{e}"))?;
        if let Record::Seal(s) = rec {
            v.seal(s, at).map_err(fail)?;
        }
    }
    let seals = v.check_seals().map_err(fail)?;
    v.anchors(anchors).map_err(fail)?;
    let mut last = 0;
    for (i, line) in open_lines(f)?.enumerate() {
        let at = Location::Line(i as u64 + 1);
        last = i as u64 + 1;
        if let Ok(Record::Event(e, hash, seq)) = parse_line(&line?) {
            let it = ChainItem {
                id: e.id,
                tenant_id: e.tenant_id.clone(),
                sealed: Some((seq, hash)),
                // An export line holds the event's tenant only.
                sealed_tenant: None,
                event: Some(e),
            };
            v.item(&it, at).map_err(fail)?;
        }
    }
    v.finish(Location::Line(last)).map_err(fail)?;
    say(&serde_json::to_string(
        &serde_json::json!({"verified": true, "seals": seals, "events": v.events_verified,
                            "anchors": anchors.len(), "heads": v.heads()}),
    )?);
    Ok(())
}

/// `--decided-after`: a duration within the bounds a tenant document's
/// `retention.decided_after` has (1h to 36500d). Before, `0s` purged every decided proposal,
/// one decided a second ago included, and `36501d` ran past the timestamp range.
fn parse_decided_after(s: &str) -> Result<Duration, String> {
    use actiond_core::tenant::{MAX_DECIDED_AFTER, MIN_DECIDED_AFTER};
    let d = parse_duration(s)?;
    if (MIN_DECIDED_AFTER..=MAX_DECIDED_AFTER).contains(&d) {
        Ok(d)
    } else {
        Err(format!(
            "{s:?} must be from 1h to 36500d (a shorter one is almost surely a typo for days)"
        ))
    }
}

async fn export(a: ExportArgs) -> anyhow::Result<()> {
    let Some(format) = Format::parse(&a.format) else {
        return Err(crate::exit::invalid(
            "--format must be jsonl or cloudevents",
        ));
    };
    let since = a.since.to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let db = Db::connect(&a.db.database_url, 2)?;
    let mut ex = Export::start(
        &db,
        ExportOptions {
            since,
            tenant: a.tenant.clone(),
            format,
        },
    )
    .await
    .map_err(|e| needs_role("export", AUDITOR, e))?;
    let stdout = std::io::stdout();
    // A closed stdout (`| head -1`) ends the export with exit 0 (a write, or the last flush).
    let mut out = crate::output::JsonEscaping::new(std::io::BufWriter::new(
        crate::output::EndOnClosedPipe(stdout.lock()),
    ));
    let stop = actiond_runtime::shutdown_signal();
    tokio::pin!(stop);
    loop {
        let n = ex
            .page(&db, &mut out)
            .await
            .map_err(|e| needs_role("export", AUDITOR, e))?;
        if n > 0 {
            continue;
        }
        // Flushed here, not by the drop (which would swallow an error), also while following.
        out.flush().context("export output")?;
        if !a.follow {
            return Ok(());
        }
        tokio::select! {
            () = actiond_runtime::clock::sleep(Duration::from_secs(1)) => {}
            () = &mut stop => return Ok(()),
        }
    }
}

async fn purge(a: PurgeArgs) -> anyhow::Result<()> {
    let db = Db::connect(&a.db.database_url, 2)?;
    let metrics = Metrics::new("retention");
    let purged = metrics.counter_vec(
        "retention_purged_rows_total",
        "Decided proposals whose params, source text and reasons were purged.",
        &["tenant"],
    );
    // Every tenant's series is there at 0 from the first scrape: the rounds add only the
    // tenants they purged, so before the first round ended (or after a failed one, or for a
    // tenant applied since) the counter had no series and its panel said "No data".
    let (zero, sdb) = (purged.clone(), db.clone());
    let service = db_service("retention", &metrics, &db, a.admin_listen).on_scrape(move || {
        let (zero, db) = (zero.clone(), sdb.clone());
        async move {
            if let Ok(tenants) = actiond_store::retention::tenant_ages(&db, Duration::ZERO).await {
                for (t, _) in &tenants {
                    zero.with_label_values(&[t.as_str()]);
                }
            }
        }
    });
    start(service)
        .await?
        .run_worker(|stop| purging(a, db, purged, stop))
        .await
}

/// `actiond dev`'s retention job: `actiond audit purge --interval 1h` as a child process with
/// its own login (role `actiond_retention`), its metrics listener on a free loopback port and
/// its stderr piped (dev relays it and reads the port from it). In a fresh dev nothing is old
/// enough to purge; it runs so its metrics are scraped as in production.
pub fn spawn_dev_retention(
    exe: &std::path::Path,
    database_url: &str,
) -> anyhow::Result<(&'static str, tokio::process::Child)> {
    let child = tokio::process::Command::new(exe)
        .args(["audit", "purge", "--interval", "1h"])
        .env("DATABASE_URL", database_url)
        .env("ACTIOND_RETENTION_ADMIN_LISTEN", "127.0.0.1:0")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("cannot start actiond audit purge")?;
    Ok(("retention", child))
}

/// Purge rounds: one, or one every `--interval` until `stop`.
async fn purging(
    a: PurgeArgs,
    db: Db,
    purged: prometheus::IntCounterVec,
    mut stop: Stop,
) -> anyhow::Result<()> {
    let stop = stop.wait();
    tokio::pin!(stop);
    loop {
        // With --interval a failed round (Postgres restarting, a lost connection) is logged
        // and the next one runs on time; a single run reports the error and exits.
        match actiond_store::retention::purge(&db, a.decided_after, a.batch).await {
            Ok(r) => {
                for (t, _, n) in &r.tenants {
                    purged.with_label_values(&[t.as_str()]).inc_by(*n);
                }
                say(&serde_json::to_string(&r)?);
            }
            Err(e) if a.interval.is_some() => {
                tracing::warn!(error = %e, "purge round failed; trying again next interval");
            }
            Err(e) => return Err(needs_role("purge", "actiond_retention", e)),
        }
        let Some(every) = a.interval else {
            return Ok(());
        };
        tokio::select! {
            () = actiond_runtime::clock::sleep(every) => {}
            () = &mut stop => return Ok(()),
        }
    }
}
