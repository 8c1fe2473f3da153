//! Secrets from files only (design rule: "never from environment variables, config files or the
//! database").
//!
//! The directory is `--credentials-dir` when given, else `$CREDENTIALS_DIRECTORY` (set by
//! systemd's `LoadCredential=`, or a mounted Kubernetes secret). The guide's failure mode
//! "EACCES … /etc/actiond/dns_token" is what reading the source file instead looks like.

use std::path::{Path, PathBuf};

/// Errors reading credentials. Messages name the file, never its content.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    /// No directory configured.
    #[error(
        "no credentials directory: pass --credentials-dir or run under systemd LoadCredential= ($CREDENTIALS_DIRECTORY)"
    )]
    NoDirectory,
    /// The name is not a plain file name.
    #[error("credential name {0:?} is not a plain name")]
    BadName(String),
    /// The file could not be read.
    #[error("credential {name} could not be read from {dir}: {source}")]
    Read {
        /// Credential name.
        name: String,
        /// Directory.
        dir: String,
        /// Cause.
        source: std::io::Error,
    },
}

/// A directory of credential files.
#[derive(Debug, Clone)]
pub struct CredentialsDir(PathBuf);

impl CredentialsDir {
    /// `explicit` when given, else `$CREDENTIALS_DIRECTORY`.
    pub fn resolve(explicit: Option<&Path>) -> Result<Self, CredentialError> {
        if let Some(p) = explicit {
            return Ok(Self(p.to_path_buf()));
        }
        match std::env::var_os("CREDENTIALS_DIRECTORY") {
            Some(p) if !p.is_empty() => Ok(Self(PathBuf::from(p))),
            _ => Err(CredentialError::NoDirectory),
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Reads credential `name` (a plain file name: no `/`, no `..`), trimmed of surrounding
    /// whitespace.
    pub fn read(&self, name: &str) -> Result<String, CredentialError> {
        let plain = !name.is_empty()
            && name != "."
            && name != ".."
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
            && !name.starts_with('.');
        if !plain {
            return Err(CredentialError::BadName(name.to_owned()));
        }
        std::fs::read_to_string(self.0.join(name))
            .map(|s| s.trim().to_owned())
            .map_err(|source| CredentialError::Read {
                name: name.to_owned(),
                dir: self.0.display().to_string(),
                source,
            })
    }

    /// Reads a tenant-scoped credential `<tenant>.<name>`; both parts must match
    /// `^[a-z0-9_-]+$`, so one tenant can never name another tenant's secret or a path.
    pub fn read_tenant(&self, tenant: &str, name: &str) -> Result<String, CredentialError> {
        if !actiond_core::ids::is_credential_part(tenant)
            || !actiond_core::ids::is_credential_part(name)
        {
            return Err(CredentialError::BadName(format!("{tenant}.{name}")));
        }
        self.read(&format!("{tenant}.{name}"))
    }
}
