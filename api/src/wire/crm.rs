//! What the API shows of contacts, companies, deals and their timeline: built
//! from the entities field by field, so a column added for internal use (a
//! company's `match_key`) stays out of responses until it is listed here.
//! No doc comments on the types: the schemas keep the names and text they
//! had when the entities were the wire types.

use chrono::{DateTime, Utc};
use domain::crm::deal::DealStage;
use domain::entities::{company, contact, crm_activity, deal};
use domain::idempotency::Subject;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::wire::about::About;

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Company {
    pub id: i64,
    pub name: String,
    pub domain: Option<String>,
    pub version: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<company::Model> for Company {
    fn from(m: company::Model) -> Self {
        Self {
            id: m.id,
            name: m.name,
            domain: m.domain,
            version: m.version,
            created_at: m.created_at,
            updated_at: m.updated_at,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Contact {
    pub id: i64,
    pub email: Option<String>,
    pub name: Option<String>,
    pub phone: Option<String>,
    pub company_id: Option<i64>,
    pub version: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<contact::Model> for Contact {
    fn from(m: contact::Model) -> Self {
        Self {
            id: m.id,
            email: m.email,
            name: m.name,
            phone: m.phone,
            company_id: m.company_id,
            version: m.version,
            created_at: m.created_at,
            updated_at: m.updated_at,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[schema(as = Deal)]
pub struct DealOut {
    pub id: i64,
    pub name: String,
    pub stage: DealStage,
    pub amount_cents: i64,
    pub currency: String,
    pub owner_id: Option<i64>,
    pub contact_id: Option<i64>,
    pub company_id: Option<i64>,
    pub lead_id: Option<i64>,
    pub lost_reason: Option<String>,
    pub closed_at: Option<DateTime<Utc>>,
    pub version: i64,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<deal::Model> for DealOut {
    fn from(m: deal::Model) -> Self {
        Self {
            id: m.id,
            name: m.name,
            stage: m.stage,
            amount_cents: m.amount_cents,
            currency: m.currency,
            owner_id: m.owner_id,
            contact_id: m.contact_id,
            company_id: m.company_id,
            lead_id: m.lead_id,
            lost_reason: m.lost_reason,
            closed_at: m.closed_at,
            version: m.version,
            created_at: m.created_at,
            updated_at: m.updated_at,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CrmActivity {
    pub id: i64,
    pub subject_type: String,
    pub subject_id: i64,
    pub kind: String,
    pub author_id: Option<i64>,
    #[schema(value_type = Option<Object>)]
    pub detail: Option<serde_json::Value>,
    pub correlation_id: Option<String>,
    pub created_at: DateTime<Utc>,
}

impl From<crm_activity::Model> for CrmActivity {
    fn from(m: crm_activity::Model) -> Self {
        Self {
            id: m.id,
            subject_type: m.subject_type,
            subject_id: m.subject_id,
            kind: m.kind,
            author_id: m.author_id,
            detail: m.detail,
            correlation_id: m.correlation_id,
            created_at: m.created_at,
        }
    }
}

crate::wire::versioned::versioned!(Company, Contact, DealOut);
crate::wire::about::about_nobody!(Company);

impl About for Contact {
    fn subjects(&self) -> Vec<Subject> {
        vec![Subject::Contact(self.id)]
    }
}

/// A deal names its lead and contact: a stored answer about it goes with them.
impl About for DealOut {
    fn subjects(&self) -> Vec<Subject> {
        let lead = self.lead_id.map(Subject::Lead);
        lead.into_iter()
            .chain(self.contact_id.map(Subject::Contact))
            .collect()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use chrono::TimeZone;

    use super::*;
    use crate::wire::check::assert_documented;

    // Every column set, internal ones included: only the documented keys go out.
    #[test]
    fn each_sends_exactly_its_documented_keys() {
        let at = Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap();
        let company = company::Model {
            id: 1,
            name: "Acme".into(),
            domain: Some("acme.example".into()),
            match_key: "match-key-internal".into(),
            version: 2,
            created_at: at,
            updated_at: at,
        };
        assert_documented(&Company::from(company), &["match-key-internal"]);
        let contact = contact::Model {
            id: 1,
            email: Some("ada@acme.example".into()),
            name: Some("Ada".into()),
            phone: Some("15550100".into()),
            company_id: Some(1),
            version: 1,
            created_at: at,
            updated_at: at,
        };
        assert_documented(&Contact::from(contact), &[]);
        let deal = deal::Model {
            id: 1,
            name: "Pilot".into(),
            stage: DealStage::Lost,
            amount_cents: 100,
            currency: "EUR".into(),
            owner_id: Some(2),
            contact_id: Some(1),
            company_id: Some(1),
            lead_id: Some(9),
            lost_reason: Some("budget".into()),
            closed_at: Some(at),
            version: 3,
            created_at: at,
            updated_at: at,
        };
        assert_documented(&DealOut::from(deal), &[]);
        let activity = crm_activity::Model {
            id: 1,
            subject_type: "deal".into(),
            subject_id: 1,
            kind: "created".into(),
            author_id: Some(2),
            detail: Some(serde_json::json!({ "name": "Pilot" })),
            correlation_id: Some("c-1".into()),
            created_at: at,
        };
        assert_documented(&CrmActivity::from(activity), &[]);
    }
}

/// Whether a match-or-create found an existing record (`200`) or made one (`201`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum MatchOutcome {
    Created,
    Matched,
}
