use sea_orm::entity::prelude::*;
use serde::Serialize;
use utoipa::ToSchema;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, Serialize, ToSchema)]
#[schema(as = Deal)]
#[sea_orm(table_name = "deal")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub name: String,
    pub stage: crate::crm::deal::stage::DealStage,
    pub amount_cents: i64,
    pub currency: String,
    pub owner_id: Option<i64>,
    pub contact_id: Option<i64>,
    pub company_id: Option<i64>,
    pub lead_id: Option<i64>,
    pub lost_reason: Option<String>,
    #[schema(value_type = Option<String>, format = DateTime)]
    pub closed_at: Option<ChronoDateTimeUtc>,
    pub version: i64,
    #[schema(value_type = String, format = DateTime)]
    pub created_at: ChronoDateTimeUtc,
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: ChronoDateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
