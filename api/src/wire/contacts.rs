//! What `/api/contacts` takes and shows.

/// The body of `PATCH /api/contacts/{id}`: the domain's own change.
pub use domain::crm::contact::ContactPatch;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::wire::about::About;
use crate::wire::crm::{Contact, MatchOutcome};
use crate::wire::versioned::Versioned;

/// A contact; after a create, with what the create did.
#[derive(Serialize, Deserialize, ToSchema)]
pub struct ContactOut {
    #[serde(flatten)]
    pub contact: Contact,
    /// Only in the answer to `POST /api/contacts`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<MatchOutcome>,
}

impl From<domain::entities::contact::Model> for ContactOut {
    fn from(contact: domain::entities::contact::Model) -> Self {
        Self {
            contact: contact.into(),
            outcome: None,
        }
    }
}

impl About for ContactOut {
    fn subjects(&self) -> Vec<domain::idempotency::Subject> {
        self.contact.subjects()
    }
}

impl Versioned for ContactOut {
    fn version(&self) -> i64 {
        self.contact.version
    }
}

/// A contact to match (by email) or create; needs an email, a name or a phone.
#[derive(Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ContactIn {
    /// Trimmed and lower-cased; the contact's match key.
    pub email: Option<String>,
    pub name: Option<String>,
    pub phone: Option<String>,
    pub company_id: Option<i64>,
}

#[derive(Serialize, Deserialize, IntoParams)]
pub struct Filter {
    /// Case-insensitive text in name or email.
    pub q: Option<String>,
    /// Only the contact with this (normalised) email.
    pub email: Option<String>,
    /// Only contacts of this company.
    pub company_id: Option<i64>,
}
