//! What `GET /api/event-types` shows.

use domain::outbound::events::EventTypeInfo;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(Serialize, Deserialize, ToSchema)]
pub struct EventTypeList {
    pub data: Vec<EventTypeInfo>,
}
