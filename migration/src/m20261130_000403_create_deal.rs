use sea_orm_migration::{prelude::*, schema::*};

use crate::m20261130_000001_create_principal::Principal;
use crate::m20261130_000002_create_lead::Lead;
use crate::m20261130_000401_create_company::Company;
use crate::m20261130_000402_create_contact::Contact;

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
                    .table(Deal::Table)
                    .col(big_pk_auto(Deal::Id))
                    .col(string_len(Deal::Name, 255))
                    .col(string_len(Deal::Stage, 16).default("open"))
                    // Minor units (cents): money is never a float.
                    .col(big_integer(Deal::AmountCents))
                    .col(string_len(Deal::Currency, 3))
                    .col(big_integer_null(Deal::OwnerId))
                    .col(big_integer_null(Deal::ContactId))
                    .col(big_integer_null(Deal::CompanyId))
                    .col(big_integer_null(Deal::LeadId))
                    .col(string_len_null(Deal::LostReason, 1000))
                    .col(timestamp_with_time_zone_null(Deal::ClosedAt))
                    .col(big_integer(Deal::Version).default(1))
                    .col(timestamp_with_time_zone(Deal::CreatedAt))
                    .col(timestamp_with_time_zone(Deal::UpdatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .name("deal_owner_fk")
                            .from(Deal::Table, Deal::OwnerId)
                            .to(Principal::Table, Principal::Id),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .name("deal_contact_fk")
                            .from(Deal::Table, Deal::ContactId)
                            .to(Contact::Table, Contact::Id),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .name("deal_company_fk")
                            .from(Deal::Table, Deal::CompanyId)
                            .to(Company::Table, Company::Id),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .name("deal_lead_fk")
                            .from(Deal::Table, Deal::LeadId)
                            .to(Lead::Table, Lead::Id),
                    )
                    .to_owned(),
            )
            .await?;
        for (name, cols) in [
            ("deal_updated_at_idx", vec![Deal::UpdatedAt, Deal::Id]),
            ("deal_created_at_idx", vec![Deal::CreatedAt, Deal::Id]),
            ("deal_stage_idx", vec![Deal::Stage]),
            ("deal_owner_idx", vec![Deal::OwnerId]),
            ("deal_contact_idx", vec![Deal::ContactId]),
            ("deal_company_idx", vec![Deal::CompanyId]),
        ] {
            let mut index = Index::create();
            index.name(name).table(Deal::Table);
            for col in cols {
                index.col(col);
            }
            manager.create_index(index.to_owned()).await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(Deal::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
pub enum Deal {
    Table,
    Id,
    Name,
    Stage,
    AmountCents,
    Currency,
    OwnerId,
    ContactId,
    CompanyId,
    LeadId,
    LostReason,
    ClosedAt,
    Version,
    CreatedAt,
    UpdatedAt,
}
