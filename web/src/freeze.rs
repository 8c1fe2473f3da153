//! Freezing an agent from any of its proposals.

use crate::AppState;
use crate::error::WebResult;
use crate::pages::AgentFacts;
use crate::session::Viewer;
use actiond_store::approvals::ProposalDetail;

/// What the decision page shows about `p`'s agent.
pub(crate) async fn agent_facts(
    _state: &AppState,
    _v: &Viewer,
    _p: &ProposalDetail,
) -> WebResult<AgentFacts> {
    Ok(AgentFacts::default())
}
