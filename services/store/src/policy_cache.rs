//! Compiled tenant documents, cached by (tenant, version): the one document cache of every
//! service. Documents are immutable, so a cached version never goes stale; only "which version
//! is latest" is asked each time, so a newly applied document takes effect at once.
//!
//! The one exception is [`PolicyCache::latest_seen`], for a write that checks the version in
//! its own statement (a submission: `proposals::SUBMIT_SQL` stores nothing when the version it
//! was validated against is no longer the latest, and names the latest). Such a write needs no
//! read before it, and an `apply` still takes effect at once.

use crate::{Db, Result, StoreError, tenants};
use actiond_core::policy::CompiledPolicy;
use actiond_core::tenant::TenantDocument;
use deadpool_postgres::GenericClient;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Tenants whose latest version [`PolicyCache::latest_seen`] remembers at most (a bound; when
/// full it starts again empty).
const MAX_SEEN: usize = 100_000;

/// Cache of compiled policies (each holds its parsed [`TenantDocument`]).
#[derive(Default)]
pub struct PolicyCache {
    compiled: Mutex<HashMap<(String, i32), CompiledPolicy>>,
    /// The latest version of each tenant's document this process has seen (see
    /// [`PolicyCache::latest_seen`]).
    seen: Mutex<HashMap<String, i32>>,
}

impl PolicyCache {
    /// The tenant's latest document, compiled; `None` when the tenant has none.
    pub async fn latest<C: GenericClient>(
        &self,
        c: &C,
        tenant: &str,
    ) -> Result<Option<CompiledPolicy>> {
        let Some((v, _sha)) = tenants::latest_version(c, tenant).await? else {
            return Ok(None);
        };
        self.version(c, tenant, v).await
    }

    /// The tenant's latest document as this process last saw it, compiled, without a database
    /// read once seen; `None` when the tenant has none. The flag says whether the answer is
    /// remembered (true) or was read now (false). **Only for a write that checks in its own
    /// statement that this version is still the latest** and says which one is
    /// (`proposals::submit` and its `Submitted::StaleDocument`; pass that version to
    /// [`PolicyCache::seen_version`]), and that refuses nothing on a remembered version alone
    /// ([`PolicyCache::latest_now`] first). Any other reader wants [`PolicyCache::latest`].
    pub async fn latest_seen(
        &self,
        db: &Db,
        tenant: &str,
    ) -> Result<(Option<CompiledPolicy>, bool)> {
        let seen = self.seen.lock().ok().and_then(|m| m.get(tenant).copied());
        if let Some(v) = seen
            && let Some(p) = self.cached(tenant, v)
        {
            return Ok((Some(p), true));
        }
        let c = db.client().await?;
        Ok((self.latest_now(&c, tenant).await?, false))
    }

    /// The tenant's latest document, read now, and remembered for
    /// [`PolicyCache::latest_seen`]; `None` when the tenant has none.
    pub async fn latest_now<C: GenericClient>(
        &self,
        c: &C,
        tenant: &str,
    ) -> Result<Option<CompiledPolicy>> {
        let latest = tenants::latest_version(c, tenant).await?.map(|(v, _)| v);
        self.seen_version(c, tenant, latest).await
    }

    /// Records `latest` (a version a write found to be the tenant's latest, `None`: it has no
    /// document) as the one [`PolicyCache::latest_seen`] answers, and returns it compiled.
    pub async fn seen_version<C: GenericClient>(
        &self,
        c: &C,
        tenant: &str,
        latest: Option<i32>,
    ) -> Result<Option<CompiledPolicy>> {
        let Some(v) = latest else {
            self.forget(tenant);
            return Ok(None);
        };
        let p = self.version(c, tenant, v).await?;
        if p.is_some()
            && let Ok(mut m) = self.seen.lock()
        {
            if m.len() >= MAX_SEEN {
                m.clear();
            }
            m.insert(tenant.to_owned(), v);
        }
        Ok(p)
    }

    fn forget(&self, tenant: &str) {
        if let Ok(mut m) = self.seen.lock() {
            m.remove(tenant);
        }
    }

    fn cached(&self, tenant: &str, version: i32) -> Option<CompiledPolicy> {
        let m = self.compiled.lock().ok()?;
        m.get(&(tenant.to_owned(), version)).cloned()
    }

    /// One version of the tenant's document, compiled.
    pub async fn version<C: GenericClient>(
        &self,
        c: &C,
        tenant: &str,
        version: i32,
    ) -> Result<Option<CompiledPolicy>> {
        if let Some(p) = self.cached(tenant, version) {
            return Ok(Some(p));
        }
        let key = (tenant.to_owned(), version);
        let Some(stored) = tenants::version(c, tenant, version).await? else {
            return Ok(None);
        };
        let doc = stored.parse()?;
        // The hash of the source this cache compiled, not the stored `sha256` column: it is what
        // a grant signs (`GrantClaims::doc_sha256`) and what the executor compares, so a row
        // whose source was rewritten under an unchanged column cannot pass for the original.
        let sha256 = actiond_core::canonical::sha256_hex(stored.source.as_bytes());
        let compiled =
            CompiledPolicy::new(doc, stored.version, sha256).map_err(StoreError::Conflict)?;
        if let Ok(mut m) = self.compiled.lock() {
            m.insert(key, compiled.clone());
        }
        Ok(Some(compiled))
    }

    /// The tenant's latest document; `None` when the tenant has none.
    pub async fn latest_of<C: GenericClient>(
        &self,
        c: &C,
        tenant: &str,
    ) -> Result<Option<Arc<TenantDocument>>> {
        Ok(self.latest(c, tenant).await?.map(|p| p.doc))
    }

    /// One version of the tenant's document; `None` when it does not exist.
    pub async fn version_of<C: GenericClient>(
        &self,
        c: &C,
        tenant: &str,
        version: i32,
    ) -> Result<Option<Arc<TenantDocument>>> {
        Ok(self.version(c, tenant, version).await?.map(|p| p.doc))
    }

    /// The latest document of every tenant, by tenant id. A document that no longer loads
    /// (parse or compile error) is left out with a warning: it grants nobody anything.
    pub async fn latest_of_every_tenant<C: GenericClient>(
        &self,
        c: &C,
    ) -> Result<Vec<Arc<TenantDocument>>> {
        let rows = c
            .query(
                "SELECT DISTINCT ON (tenant_id) tenant_id, version FROM tenant_documents
                 ORDER BY tenant_id, version DESC",
                &[],
            )
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows {
            let tenant: String = r.get("tenant_id");
            let version: i32 = r.get("version");
            match self.version_of(c, &tenant, version).await {
                Ok(Some(d)) => out.push(d),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(tenant, version, error = %e.detail(), "tenant document skipped");
                }
            }
        }
        Ok(out)
    }
}
