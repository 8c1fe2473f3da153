//! The sealer's own state outside the database, and its seal sink.
//!
//! - State: `<state dir>/heads.json`, `{"version":1,"tenants":{"<tenant>":{"seq":…,
//!   "head_hash":…,"seal_hash":…,"last_event_id":…}}}`: each tenant's newest seal as the sealer
//!   wrote it ([`KeptHead`]). Replaced atomically (written to `heads.json.tmp`, synced, renamed,
//!   the directory synced), mode 0600, after every commit. A crash between a commit and the
//!   save leaves the file one step behind the database, which the sealer accepts on start
//!   because the newer seals link to the kept one and carry its own signature.
//! - Sink: a file the sealer appends every seal it writes to, one JSON line each (the
//!   `{"record":"seal",…}` line of `actiond audit export`), synced before the state is saved.
//!   After a crash a seal may be appended twice (identical lines). `actiond audit verify
//!   --anchors-from` reads it back.

use actiond_core::audit_chain::Seal;
use actiond_core::audit_export::{Format, seal_line};
use actiond_core::audit_head::KeptHead;
use actiond_store::seals::Heads;
use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// File name of the kept heads in the state directory.
pub const HEADS_FILE: &str = "heads.json";

#[derive(Serialize, Deserialize)]
struct StateFile {
    version: u32,
    tenants: Heads,
}

/// The sealer's state directory.
#[derive(Debug, Clone)]
pub struct StateDir {
    dir: PathBuf,
}

impl StateDir {
    /// Opens (creating it, mode 0700, when missing) the state directory.
    pub fn open(dir: &Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("--state-dir {}: cannot create", dir.display()))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        }
        Ok(Self {
            dir: dir.to_owned(),
        })
    }

    fn path(&self) -> PathBuf {
        self.dir.join(HEADS_FILE)
    }

    /// The kept heads, or `None` when the sealer has no state yet. A file that cannot be read
    /// as one is an error naming it (never taken as empty: that would accept any chain).
    pub fn load(&self) -> anyhow::Result<Option<Heads>> {
        let p = self.path();
        let text = match std::fs::read_to_string(&p) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", p.display())),
        };
        let f: StateFile = serde_json::from_str(&text)
            .with_context(|| format!("{}: not a sealer state file", p.display()))?;
        if f.version != 1 {
            bail!("{}: version {} is not 1", p.display(), f.version);
        }
        Ok(Some(f.tenants))
    }

    /// Replaces the kept heads atomically and durably.
    pub fn save(&self, heads: &Heads) -> anyhow::Result<()> {
        let p = self.path();
        let tmp = self.dir.join(format!("{HEADS_FILE}.tmp"));
        let body = serde_json::to_string_pretty(&StateFile {
            version: 1,
            tenants: heads.clone(),
        })?;
        {
            let mut o = std::fs::OpenOptions::new();
            o.write(true).create(true).truncate(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt as _;
                o.mode(0o600);
            }
            let mut f = o
                .open(&tmp)
                .with_context(|| format!("cannot write {}", tmp.display()))?;
            f.write_all(body.as_bytes())?;
            f.write_all(b"\n")?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, &p).with_context(|| format!("cannot replace {}", p.display()))?;
        std::fs::File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .with_context(|| format!("cannot sync {}", self.dir.display()))?;
        Ok(())
    }
}

/// Appends `seals` to the sink file (created 0600 when missing), one JSON line each, synced.
pub fn append_to_sink(path: &Path, seals: &[Seal]) -> anyhow::Result<()> {
    if seals.is_empty() {
        return Ok(());
    }
    let mut o = std::fs::OpenOptions::new();
    o.append(true).create(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        o.mode(0o600);
    }
    let mut f = o
        .open(path)
        .with_context(|| format!("--sink {}: cannot open for appending", path.display()))?;
    let mut buf = String::new();
    for s in seals {
        buf.push_str(&seal_line(Format::Jsonl, s));
        buf.push('\n');
    }
    f.write_all(buf.as_bytes())
        .and_then(|()| f.sync_data())
        .with_context(|| format!("--sink {}: cannot append", path.display()))?;
    Ok(())
}

/// `tenant:seq:head` of each kept head, sorted (for the log and `seal --once`'s output).
pub fn anchors(heads: &Heads) -> Vec<String> {
    heads.iter().map(|(t, h)| KeptHead::anchor(h, t)).collect()
}
