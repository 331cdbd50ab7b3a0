use sea_orm_migration::{prelude::*, schema::*};

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
                    .table(Source::Table)
                    // The name is the key: it is in every webhook URL and lead.
                    .col(string_len(Source::Name, 64).primary_key())
                    .col(string_len(Source::Scheme, 32))
                    // Kept readable because HMAC verification needs the key
                    // itself; never returned by the API nor logged.
                    .col(json_binary(Source::Secrets))
                    .col(big_integer(Source::ToleranceSecs).default(300))
                    .col(string_len_null(Source::SignatureHeader, 128))
                    .col(string_len_null(Source::EventIdHeader, 128))
                    .col(string_len_null(Source::EventIdPointer, 255))
                    .col(string_len_null(Source::EventTypeHeader, 128))
                    .col(string_len_null(Source::EventTypePointer, 255))
                    .col(json_binary_null(Source::AllowedEventTypes))
                    .col(string_len(Source::RecordPointer, 255).default("/data"))
                    .col(string_len(Source::SourceRefPointer, 255).default("/id"))
                    .col(string_len_null(Source::EmailPointer, 255))
                    .col(string_len_null(Source::NamePointer, 255))
                    .col(string_len_null(Source::PhonePointer, 255))
                    .col(string_len_null(Source::CompanyPointer, 255))
                    .col(string_len_null(Source::UpdatedAtPointer, 255))
                    .col(timestamp_with_time_zone(Source::CreatedAt))
                    .col(timestamp_with_time_zone(Source::UpdatedAt))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(Source::Table).to_owned())
            .await
    }
}

// `SourceRefPointer` is the column `source_ref_pointer`, not a variant of a source.
#[allow(clippy::enum_variant_names)]
#[derive(DeriveIden)]
pub enum Source {
    Table,
    Name,
    Scheme,
    Secrets,
    ToleranceSecs,
    SignatureHeader,
    EventIdHeader,
    EventIdPointer,
    EventTypeHeader,
    EventTypePointer,
    AllowedEventTypes,
    RecordPointer,
    SourceRefPointer,
    EmailPointer,
    NamePointer,
    PhonePointer,
    CompanyPointer,
    UpdatedAtPointer,
    CreatedAt,
    UpdatedAt,
}
