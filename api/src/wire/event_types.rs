//! What `GET /api/event-types` shows.

use domain::outbound::events::EventTypeInfo;
use serde::Serialize;
use utoipa::ToSchema;

#[derive(Serialize, ToSchema)]
pub struct EventTypeList {
    pub data: Vec<EventTypeInfo>,
}
