use sea_orm_migration::{prelude::*, schema::*};

use crate::m20261130_000001_create_principal::Principal;
use crate::m20261130_000002_create_lead::Lead;
use crate::m20261130_000401_create_company::Company;
use crate::m20261130_000402_create_contact::Contact;
use crate::m20261130_000403_create_deal::Deal;

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    fn use_transaction(&self) -> Option<bool> {
        Some(true)
    }

    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(LeadConversion::Table)
                    // One conversion per lead, whatever key or process asks.
                    .col(big_integer(LeadConversion::LeadId).primary_key())
                    .col(big_integer(LeadConversion::ContactId))
                    .col(big_integer_null(LeadConversion::CompanyId))
                    .col(big_integer_null(LeadConversion::DealId))
                    .col(big_integer(LeadConversion::ConvertedBy))
                    .col(string_len_null(LeadConversion::CorrelationId, 64))
                    .col(timestamp_with_time_zone(LeadConversion::CreatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .name("lead_conversion_lead_fk")
                            .from(LeadConversion::Table, LeadConversion::LeadId)
                            .to(Lead::Table, Lead::Id),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .name("lead_conversion_contact_fk")
                            .from(LeadConversion::Table, LeadConversion::ContactId)
                            .to(Contact::Table, Contact::Id),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .name("lead_conversion_company_fk")
                            .from(LeadConversion::Table, LeadConversion::CompanyId)
                            .to(Company::Table, Company::Id),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .name("lead_conversion_deal_fk")
                            .from(LeadConversion::Table, LeadConversion::DealId)
                            .to(Deal::Table, Deal::Id),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .name("lead_conversion_by_fk")
                            .from(LeadConversion::Table, LeadConversion::ConvertedBy)
                            .to(Principal::Table, Principal::Id),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(LeadConversion::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
pub enum LeadConversion {
    Table,
    LeadId,
    ContactId,
    CompanyId,
    DealId,
    ConvertedBy,
    CorrelationId,
    CreatedAt,
}
