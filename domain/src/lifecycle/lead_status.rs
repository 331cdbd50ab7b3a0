//! The lead status machine:
//! `new → contacted → qualified → converted`; any open status → `lost` (reason
//! required); `lost → new` (recycle); `converted` is final.

use sea_orm::sea_query::StringLen;
use serde::{Deserialize, Serialize};

// Stored as its snake_case name in a text column (`String(16)`), the
// same text the API shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[derive(sea_orm::EnumIter, sea_orm::DeriveActiveEnum)]
#[sea_orm(rs_type = "String", db_type = "String(StringLen::N(16))")]
pub enum LeadStatus {
    #[sea_orm(string_value = "new")]
    New,
    #[sea_orm(string_value = "contacted")]
    Contacted,
    #[sea_orm(string_value = "qualified")]
    Qualified,
    #[sea_orm(string_value = "converted")]
    Converted,
    #[sea_orm(string_value = "lost")]
    Lost,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    #[error("cannot move a lead from '{from}' to '{to}'")]
    Illegal {
        from: LeadStatus,
        to: LeadStatus,
        allowed: Vec<LeadStatus>,
    },
    #[error("moving a lead to 'lost' needs a reason")]
    ReasonRequired,
}

impl LeadStatus {
    pub const ALL: [LeadStatus; 5] = [
        Self::New,
        Self::Contacted,
        Self::Qualified,
        Self::Converted,
        Self::Lost,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::New => "new",
            Self::Contacted => "contacted",
            Self::Qualified => "qualified",
            Self::Converted => "converted",
            Self::Lost => "lost",
        }
    }

    pub fn is_open(self) -> bool {
        matches!(self, Self::New | Self::Contacted | Self::Qualified)
    }

    /// Where a lead in this status may go next.
    pub fn allowed_next(self) -> &'static [LeadStatus] {
        match self {
            Self::New => &[Self::Contacted, Self::Lost],
            Self::Contacted => &[Self::Qualified, Self::Lost],
            Self::Qualified => &[Self::Converted, Self::Lost],
            Self::Lost => &[Self::New],
            Self::Converted => &[],
        }
    }

    /// Checks one move; `reason` is required for `lost` and optional otherwise.
    pub fn transition(
        self,
        to: LeadStatus,
        reason: Option<&str>,
    ) -> Result<LeadStatus, TransitionError> {
        if !self.allowed_next().contains(&to) {
            return Err(TransitionError::Illegal {
                from: self,
                to,
                allowed: self.allowed_next().to_vec(),
            });
        }
        if to == Self::Lost && reason.is_none_or(|r| r.trim().is_empty()) {
            return Err(TransitionError::ReasonRequired);
        }
        Ok(to)
    }
}

text_enum!(LeadStatus, "unknown status '{}'");

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::LeadStatus::{self, *};
    use super::TransitionError;

    /// Every (from, to) pair, against the table in the module docs.
    #[test]
    fn every_move_is_allowed_or_refused_exactly_as_specified() {
        let legal = [
            (New, Contacted),
            (Contacted, Qualified),
            (Qualified, Converted),
            (New, Lost),
            (Contacted, Lost),
            (Qualified, Lost),
            (Lost, New),
        ];
        for from in LeadStatus::ALL {
            for to in LeadStatus::ALL {
                let result = from.transition(to, Some("no budget"));
                if legal.contains(&(from, to)) {
                    assert_eq!(result, Ok(to), "{from} -> {to}");
                } else {
                    assert!(
                        matches!(&result, Err(TransitionError::Illegal { from: f, to: t, .. }) if *f == from && *t == to),
                        "{from} -> {to} gave {result:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn lost_needs_a_reason() {
        for from in [New, Contacted, Qualified] {
            assert_eq!(
                from.transition(Lost, None),
                Err(TransitionError::ReasonRequired)
            );
            assert_eq!(
                from.transition(Lost, Some("  ")),
                Err(TransitionError::ReasonRequired)
            );
        }
        assert_eq!(Lost.transition(New, None), Ok(New));
    }

    #[test]
    fn illegal_moves_name_the_allowed_ones() {
        let Err(TransitionError::Illegal { allowed, .. }) = New.transition(Converted, None) else {
            panic!("expected illegal");
        };
        assert_eq!(allowed, [Contacted, Lost]);
        assert!(Converted.allowed_next().is_empty());
    }

    #[test]
    fn statuses_round_trip_through_strings() {
        for s in LeadStatus::ALL {
            assert_eq!(s.as_str().parse::<LeadStatus>().unwrap(), s);
        }
        assert!("won".parse::<LeadStatus>().is_err());
    }
}
