//! What `/api/companies` takes and shows.

/// The body of `PATCH /api/companies/{id}`: the domain's own change.
pub use domain::crm::company::CompanyPatch;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::wire::crm::{Company, MatchOutcome};
use crate::wire::versioned::Versioned;

/// A company; after a create, with what the create did.
#[derive(Serialize, Deserialize, ToSchema)]
pub struct CompanyOut {
    #[serde(flatten)]
    pub company: Company,
    /// Only in the answer to `POST /api/companies`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<MatchOutcome>,
}

impl From<domain::entities::company::Model> for CompanyOut {
    fn from(company: domain::entities::company::Model) -> Self {
        Self {
            company: company.into(),
            outcome: None,
        }
    }
}

impl Versioned for CompanyOut {
    fn version(&self) -> i64 {
        self.company.version
    }
}

/// A company to match or create; give a `domain` (or a `website`) or a `name`.
#[derive(Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompanyIn {
    /// Defaults to the domain.
    pub name: Option<String>,
    /// Normalised: lower-case, no scheme, path, port or `www.`; free-mail domains are refused.
    pub domain: Option<String>,
    /// A URL; its host becomes the domain when `domain` is absent.
    pub website: Option<String>,
}

#[derive(Serialize, Deserialize, IntoParams)]
pub struct Filter {
    /// Case-insensitive text in name or domain.
    pub q: Option<String>,
    /// Only the company with this (normalised) domain.
    pub domain: Option<String>,
}

crate::wire::about::about_nobody!(CompanyOut);
