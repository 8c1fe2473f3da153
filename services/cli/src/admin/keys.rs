//! `actiond keygen` and the secret files it (and agent tokens, and `actiond dev`) writes.

use actiond_core::grant::{generate_key, validate_key_id};
use actiond_runtime::say;
use anyhow::Context;
use std::path::PathBuf;

/// `actiond keygen`.
#[derive(Debug, Clone, clap::Args)]
pub struct KeygenArgs {
    /// Key id: `policy-…`, `web-…` or `breakglass-…`.
    #[arg(long)]
    pub key_id: String,
    /// Directory to write `grant_signing_key` (mode 0600, secret) and `<key_id>.pub` into.
    #[arg(long)]
    pub out_dir: PathBuf,
}

/// Creates a new secret file with mode 0600, refusing to overwrite.
pub fn open_secret(path: &std::path::Path) -> anyhow::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot create {} (it must not exist yet)", path.display()))
}

/// Writes a secret file with mode 0600, refusing to overwrite.
pub fn write_secret(path: &std::path::Path, content: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    open_secret(path)?.write_all(content.as_bytes())?;
    Ok(())
}

/// `actiond keygen`.
pub fn keygen(a: KeygenArgs) -> anyhow::Result<()> {
    validate_key_id(&a.key_id)?;
    std::fs::create_dir_all(&a.out_dir)?;
    let k = generate_key()?;
    write_secret(&a.out_dir.join("grant_signing_key"), &k.private_pkcs8_b64)?;
    std::fs::write(
        a.out_dir.join(format!("{}.pub", a.key_id)),
        format!("{}\n", k.public_b64),
    )?;
    say(&format!(
        "wrote {0}/grant_signing_key (secret, 0600) and {0}/{1}.pub (copy it into the executors' trusted_keys directory)",
        a.out_dir.display(),
        a.key_id
    ));
    Ok(())
}
