//! What `/api/deals` takes.

/// The body of `PATCH /api/deals/{id}`: the domain's own change.
pub use domain::crm::deal::DealPatch;
use domain::crm::deal::{DealInput, DealStage};
use domain::ids::{CompanyId, ContactId, PrincipalId};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

/// A deal as the API takes it, also inside a conversion request.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DealIn {
    pub name: Option<String>,
    /// The amount in minor units (`1250000` is 12,500.00); never a float.
    pub amount_cents: Option<i64>,
    /// ISO 4217, e.g. `EUR` (`eur` is accepted).
    pub currency: Option<String>,
    /// An active `sales` principal; defaults to a `sales` caller.
    pub owner_id: Option<i64>,
    pub contact_id: Option<i64>,
    pub company_id: Option<i64>,
}

impl DealIn {
    pub fn into_input(self) -> DealInput {
        DealInput {
            name: self.name,
            amount_cents: self.amount_cents,
            currency: self.currency,
            owner_id: self.owner_id.map(PrincipalId),
            contact_id: self.contact_id.map(ContactId),
            company_id: self.company_id.map(CompanyId),
        }
    }
}

/// A move of the deal stage machine.
#[derive(Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = DealTransition)]
pub struct TransitionIn {
    /// `won` or `lost`.
    pub to: DealStage,
    /// Why the deal was lost.
    pub reason: Option<String>,
}

#[derive(Serialize, Deserialize, IntoParams)]
pub struct Filter {
    /// Only deals in this stage.
    #[param(value_type = Option<DealStage>)]
    pub stage: Option<String>,
    /// A principal id or `me`.
    pub owner: Option<String>,
    /// Only deals of this contact.
    pub contact_id: Option<i64>,
    /// Only deals of this company.
    pub company_id: Option<i64>,
    /// Case-insensitive text in the name.
    pub q: Option<String>,
}
