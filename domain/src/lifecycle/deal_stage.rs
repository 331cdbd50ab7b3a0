//! The deal stage machine: `open → won | lost`, and a closed deal stays
//! closed. Kept out of the deal's writes: `error` carries an
//! `IllegalStageMove` and the `deal` entity documents its column as a
//! stage, while the writes depend on both, so in one module they would name
//! each other.

use sea_orm::sea_query::StringLen;
use serde::{Deserialize, Serialize};

// Stored as its snake_case name in a text column (`String(16)`), the
// same text the API shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[derive(sea_orm::EnumIter, sea_orm::DeriveActiveEnum)]
#[sea_orm(rs_type = "String", db_type = "String(StringLen::N(16))")]
pub enum DealStage {
    #[sea_orm(string_value = "open")]
    Open,
    #[sea_orm(string_value = "won")]
    Won,
    #[sea_orm(string_value = "lost")]
    Lost,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot move a deal from '{from}' to '{to}'")]
pub struct IllegalStageMove {
    pub from: DealStage,
    pub to: DealStage,
    pub allowed: Vec<DealStage>,
}

impl DealStage {
    pub const ALL: [DealStage; 3] = [Self::Open, Self::Won, Self::Lost];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Won => "won",
            Self::Lost => "lost",
        }
    }

    /// `open → won | lost`; a closed deal stays closed.
    pub fn allowed_next(self) -> &'static [DealStage] {
        match self {
            Self::Open => &[Self::Won, Self::Lost],
            Self::Won | Self::Lost => &[],
        }
    }

    pub fn check_move(self, to: DealStage) -> Result<(), IllegalStageMove> {
        if self.allowed_next().contains(&to) {
            Ok(())
        } else {
            Err(IllegalStageMove {
                from: self,
                to,
                allowed: self.allowed_next().to_vec(),
            })
        }
    }
}

text_enum!(DealStage, "unknown stage '{}' (open, won, lost)");

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::DealStage::*;
    use super::*;

    #[test]
    fn only_open_deals_move_and_only_to_won_or_lost() {
        for from in DealStage::ALL {
            for to in DealStage::ALL {
                let legal = from == Open && to != Open;
                assert_eq!(from.check_move(to).is_ok(), legal, "{from} -> {to}");
            }
        }
        assert_eq!(
            Won.check_move(Lost).unwrap_err().allowed,
            Vec::<DealStage>::new()
        );
    }
}
