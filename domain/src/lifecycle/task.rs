//! What a task is about and where it stands: a leaf, so the outgoing
//! events can name them without reaching into the CRM folder.

use serde::{Deserialize, Serialize};

/// What a task is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = TaskSubject)]
pub enum SubjectType {
    Lead,
    Contact,
    Deal,
}

impl SubjectType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Lead => "lead",
            Self::Contact => "contact",
            Self::Deal => "deal",
        }
    }

    pub fn parse(stored: &str) -> Option<Self> {
        match stored {
            "lead" => Some(Self::Lead),
            "contact" => Some(Self::Contact),
            "deal" => Some(Self::Deal),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Open,
    Done,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Done => "done",
        }
    }

    pub fn parse(stored: &str) -> Option<Self> {
        match stored {
            "open" => Some(Self::Open),
            "done" => Some(Self::Done),
            _ => None,
        }
    }
}

impl std::str::FromStr for TaskStatus {
    type Err = &'static str;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s).ok_or("must be 'open' or 'done'")
    }
}
