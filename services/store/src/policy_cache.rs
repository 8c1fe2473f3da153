//! Compiled tenant documents, cached by (tenant, version). Documents are immutable, so a
//! cached version never goes stale; only "which version is latest" is asked each time.

use crate::{Result, StoreError, tenants};
use actiond_core::policy::CompiledPolicy;
use deadpool_postgres::GenericClient;
use std::collections::HashMap;
use std::sync::Mutex;

/// Cache of compiled policies.
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
}
