//! Compiled tenant documents, cached by (tenant, version): the one document cache of every
//! service. Documents are immutable, so a cached version never goes stale; only "which version
//! is latest" is asked each time, so a newly applied document takes effect at once.

use crate::{Result, StoreError, tenants};
use actiond_core::policy::CompiledPolicy;
use actiond_core::tenant::TenantDocument;
use deadpool_postgres::GenericClient;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Cache of compiled policies (each holds its parsed [`TenantDocument`]).
#[derive(Default)]
pub struct PolicyCache {
    compiled: Mutex<HashMap<(String, i32), CompiledPolicy>>,
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

    /// One version of the tenant's document, compiled.
    pub async fn version<C: GenericClient>(
        &self,
        c: &C,
        tenant: &str,
        version: i32,
    ) -> Result<Option<CompiledPolicy>> {
        let key = (tenant.to_owned(), version);
        if let Ok(m) = self.compiled.lock()
            && let Some(p) = m.get(&key)
        {
            return Ok(Some(p.clone()));
        }
        let Some(stored) = tenants::version(c, tenant, version).await? else {
            return Ok(None);
        };
        let doc = stored.parse()?;
        let compiled = CompiledPolicy::new(doc, stored.version, stored.sha256)
            .map_err(StoreError::Conflict)?;
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
