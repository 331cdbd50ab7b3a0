//! What `POST /api/leads/{id}/convert` takes and shows.

use domain::crm::conversion::Converted;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::wire::about::About;
use crate::wire::crm::{Company, Contact, DealOut};
use crate::wire::deals::DealIn;
use crate::wire::leads::LeadOut;
use crate::wire::versioned::Versioned;

/// What to convert the lead into besides a contact and a company.
#[derive(Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConvertIn {
    /// Also create a deal; its owner defaults to the lead's owner, else a
    /// `sales` caller.
    pub deal: Option<DealIn>,
}

/// The records a conversion produced or linked.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = Converted)]
pub struct ConvertedOut {
    pub lead: LeadOut,
    pub contact: Contact,
    pub contact_created: bool,
    pub company: Option<Company>,
    pub company_created: bool,
    pub deal: Option<DealOut>,
}

impl From<Converted> for ConvertedOut {
    fn from(c: Converted) -> Self {
        Self {
            lead: c.lead.into(),
            contact: c.contact.into(),
            contact_created: c.contact_created,
            company: c.company.map(Company::from),
            company_created: c.company_created,
            deal: c.deal.map(DealOut::from),
        }
    }
}

/// The converted lead and the records it became.
#[derive(Serialize, Deserialize, ToSchema)]
pub struct ConvertOut {
    #[serde(flatten)]
    pub converted: ConvertedOut,
    pub conversion: Ids,
}

impl About for ConvertOut {
    fn subjects(&self) -> Vec<domain::idempotency::Subject> {
        let converted = &self.converted;
        let mut subjects = converted.lead.subjects();
        subjects.extend(converted.contact.subjects());
        subjects.extend(converted.deal.iter().flat_map(About::subjects));
        subjects
    }
}

impl Versioned for ConvertOut {
    /// The lead's: the conversion's `ETag` is the lead's new version.
    fn version(&self) -> i64 {
        self.converted.lead.lead.version
    }
}

/// The ids of one conversion.
#[derive(Serialize, Deserialize, ToSchema)]
#[schema(as = ConversionIds)]
pub struct Ids {
    pub lead_id: i64,
    pub contact_id: i64,
    pub company_id: Option<i64>,
    pub deal_id: Option<i64>,
}
