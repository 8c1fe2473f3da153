//! `actiond tenant export` and `actiond tenant import`: move a tenant to another cell. The file
//! and its checks: `actiond_core::tenant_move`; the database side: `actiond_store::tenant_move`.

use super::DbArgs;
use actiond_core::audit_head::Anchor;
use actiond_core::ids::parse_duration;
use actiond_core::tenant_move::{check_file, end_line, header_line};
use actiond_runtime::say;
use actiond_store::{StoreError, tenant_move};
use anyhow::Context as _;
use std::io::{BufRead as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `actiond tenant export`.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// Tenant id.
    pub tenant: String,
    /// The cell the tenant moves to (recorded here, and named to agents and approvers that
    /// still reach this cell): 1 to 128 of `A-Za-z0-9_.:/-`, e.g. `eu-2` or a URL's host.
    #[arg(long = "to", value_parser = cell_name)]
    pub moved_to: String,
    /// The file to write (created; an existing file is refused).
    #[arg(long, short = 'o')]
    pub out: PathBuf,
    /// Who exports it (recorded).
    #[arg(long = "as", env = "USER", default_value = "operator")]
    pub by: String,
    /// How long to wait for handlers still running and for the sealer to seal the export
    /// (the sealer must be running: `actiond audit seal`).
    #[arg(long, default_value = "60s", value_parser = parse_duration, allow_negative_numbers = true)]
    pub wait: Duration,
    #[command(flatten)]
    pub db: DbArgs,
}

/// `actiond tenant import`.
#[derive(Debug, clap::Args)]
pub struct ImportArgs {
    /// The file `actiond tenant export` wrote.
    pub file: PathBuf,
    /// The source cell's sealer public key (a file holding it, or the base64 key itself): the
    /// file's chain must verify with it.
    #[arg(long)]
    pub public_key: String,
    /// A head taken on the source cell earlier (`tenant:seq:head`, as `actiond audit verify`
    /// prints): the file's chain must still hold it. Repeatable.
    #[arg(long = "anchor", value_name = "TENANT:SEQ:HEAD")]
    pub anchors: Vec<String>,
    /// Who imports it (recorded).
    #[arg(long = "as", env = "USER", default_value = "operator")]
    pub by: String,
    #[command(flatten)]
    pub db: DbArgs,
}

fn cell_name(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.len() <= 128
        && s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.:/-".contains(c));
    if ok {
        Ok(s.to_owned())
    } else {
        Err(
            "must be 1 to 128 characters of A-Z a-z 0-9 _ . : / -, starting with a letter or digit"
                .into(),
        )
    }
}

/// `actiond tenant export`: freeze, wait for running handlers, write the rows, record and seal
/// the digest, write the chain and the trailer.
pub async fn export(a: ExportArgs) -> anyhow::Result<()> {
    let db = a.db.connect()?;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&a.out)
        .with_context(|| format!("--out {}: cannot create it", a.out.display()))?;
    let froze = tenant_move::freeze(&db, &a.tenant, &a.moved_to, &a.by)
        .await
        .map_err(|e| match e {
            StoreError::NotFound(_) => {
                crate::exit::not_found(format!("tenant {:?} does not exist", a.tenant))
            }
            e => e.into(),
        })?;
    say(&format!(
        "tenant {}: {} for the move to {}: this cell refuses its proposals, decisions and grants from now on",
        a.tenant,
        if froze { "frozen" } else { "already frozen" },
        a.moved_to
    ));
    let deadline = tokio::time::Instant::now() + a.wait;
    wait_for(
        deadline,
        "handlers still running (proposals in executing)",
        || async { Ok(tenant_move::executing(&db, &a.tenant).await? == 0) },
    )
    .await?;
    let mut out = std::io::BufWriter::new(&mut file);
    writeln!(out, "{}", header_line(&a.tenant, &a.moved_to, &a.by))?;
    let digest = tenant_move::write_rows(&db, &a.tenant, &mut out).await?;
    let rows = digest.rows;
    let sha = digest.finish();
    let event = tenant_move::record_export(&db, &a.tenant, &a.moved_to, &a.by, &sha, rows).await?;
    let through = loop {
        if let Some(t) = tenant_move::sealed_through(&db, &a.tenant, event).await? {
            break t;
        }
        if tokio::time::Instant::now() >= deadline {
            anyhow::bail!(
                "gave up waiting for the sealer to seal the tenant.exported event {event} (is `actiond audit seal` running?); the tenant stays frozen here: run the export again"
            );
        }
        actiond_runtime::clock::sleep(Duration::from_millis(200)).await;
    };
    let chain = tenant_move::write_chain(&db, &a.tenant, through, &mut out).await?;
    writeln!(out, "{}", end_line(1 + rows + chain))?;
    out.flush()?;
    drop(out);
    file.sync_all()?;
    say(&format!(
        "tenant {}: exported {rows} rows and {chain} audit lines to {} (data sha256 {sha}, sealed in event {event}); import it on {} with `actiond tenant import`",
        a.tenant,
        a.out.display(),
        a.moved_to
    ));
    Ok(())
}

/// Polls `done` every 200 ms until it is true, or fails naming `what` at `deadline`.
async fn wait_for<F, Fut>(
    deadline: tokio::time::Instant,
    what: &str,
    mut done: F,
) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    loop {
        if done().await? {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            anyhow::bail!(
                "gave up waiting for {what} after --wait; the tenant stays frozen here: run the export again"
            );
        }
        actiond_runtime::clock::sleep(Duration::from_millis(200)).await;
    }
}

/// `actiond tenant import`: check the whole file, then load it in one transaction.
pub async fn import(a: ImportArgs) -> anyhow::Result<()> {
    let key = crate::audit::read_public_key(&a.public_key)?;
    actiond_core::audit_chain::Verifier::new(&key, true)
        .map_err(|e| crate::exit::invalid(format!("--public-key: {e}")))?;
    let mut anchors = Vec::new();
    for s in &a.anchors {
        anchors.push(Anchor::parse(s).map_err(|e| crate::exit::invalid(format!("--anchor {e}")))?);
    }
    let lines = read_lines(&a.file)?;
    let checked = check_file(&lines, &key, &anchors)
        .map_err(|e| anyhow::anyhow!("{}: refused, nothing imported: {e}", a.file.display()))?;
    let db = a.db.connect()?;
    let done = tenant_move::import(&db, &checked, &a.by).await?;
    say(&serde_json::to_string(&serde_json::json!({
        "imported": checked.header.tenant,
        "from_head": checked.head,
        "rows": done.rows,
        "seals": done.seals,
        "events": done.events,
        "event_id": done.event_id,
    }))?);
    Ok(())
}

fn read_lines(f: &Path) -> anyhow::Result<Vec<String>> {
    let file = std::fs::File::open(f).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            crate::exit::not_found(format!("{} does not exist", f.display()))
        }
        _ => anyhow::anyhow!("cannot open {}: {e}", f.display()),
    })?;
    std::io::BufReader::new(file)
        .lines()
        .collect::<std::io::Result<Vec<_>>>()
        .with_context(|| format!("cannot read {}", f.display()))
}
