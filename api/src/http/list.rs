//! Lists: the one page shape every collection answers (`Page<T>`) and the
//! one set of list parameters (`ListParams`), with the time window of the
//! lists that can be read incrementally (`WindowParams`).

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use domain::page::{self, IdWindow, SortKey, Window};
use serde::{Deserialize, Serialize};
use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, Type};
use utoipa::openapi::{Ref, RefOr, Schema};
use utoipa::{IntoParams, PartialSchema, ToSchema};

use crate::http::error::ApiError;

/// A page of a list: its rows, and the cursor of the next page (`null` on
/// the last one).
#[derive(Debug, Serialize, Deserialize)]
pub struct Page<T> {
    pub data: Vec<T>,
    pub next_cursor: Option<String>,
}

impl<T> Page<T> {
    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Page<U> {
        Page {
            data: self.data.into_iter().map(f).collect(),
            next_cursor: self.next_cursor,
        }
    }
}

impl<T> From<page::Page<T>> for Page<T> {
    fn from(page: page::Page<T>) -> Self {
        Self {
            data: page.data,
            next_cursor: page.next_cursor,
        }
    }
}

/// What a page of `Self` is called in the OpenAPI document, so each list
/// keeps its own schema name (`LeadPage`, `CompanyPage`, …) for clients.
pub trait Listed: ToSchema {
    const PAGE: &'static str;
    const PAGE_DESCRIPTION: &'static str;
}

impl<T: Listed> PartialSchema for Page<T> {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .description(Some(T::PAGE_DESCRIPTION))
            .property(
                "data",
                ArrayBuilder::new().items(RefOr::Ref(Ref::from_schema_name(T::name()))),
            )
            .required("data")
            .property(
                "next_cursor",
                ObjectBuilder::new().schema_type(utoipa::openapi::schema::SchemaType::from_iter([
                    Type::String,
                    Type::Null,
                ])),
            )
            .into()
    }
}

impl<T: Listed> ToSchema for Page<T> {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed(T::PAGE)
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((T::name().into_owned(), T::schema()));
        T::schemas(schemas);
    }
}

/// Names the page of a row type, for `#[utoipa::path(.., body = RowPage)]`
/// (the path macro takes a plain name, not `Page<Row>`):
/// `listed! { "A page of rows." type RowPage = Page<Row>; }`.
macro_rules! listed {
    ($($description:literal $vis:vis type $page:ident = Page<$row:ty>;)*) => {$(
        #[doc = $description]
        $vis type $page = $crate::http::list::Page<$row>;
        impl $crate::http::list::Listed for $row {
            const PAGE: &'static str = stringify!($page);
            const PAGE_DESCRIPTION: &'static str = $description;
        }
    )*};
}
pub(crate) use listed;

/// The parameters of every list: the page size and where to continue.
#[derive(Debug, Default, Deserialize, IntoParams)]
pub struct ListParams {
    /// Page size, 1–200 (default 50).
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<u64>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// `422` naming `field` unless `value` is absent or one of `allowed`: the
/// check of a list filter with a fixed set of values.
pub fn one_of(field: &str, value: Option<&str>, allowed: &[&str]) -> Result<(), ApiError> {
    match value {
        Some(v) if !allowed.contains(&v) => Err(ApiError::invalid(
            field,
            format!("must be one of {}", allowed.join(", ")),
        )),
        _ => Ok(()),
    }
}

/// The time window of a list that can be read incrementally.
#[derive(Debug, Default, Deserialize, IntoParams)]
pub struct WindowParams {
    /// Only records changed at or after this time (RFC 3339).
    #[param(format = DateTime)]
    pub updated_since: Option<String>,
    /// `updated_at` (default) or `created_at`.
    #[param(pattern = "^(updated_at|created_at)$")]
    pub sort: Option<String>,
}

impl ListParams {
    /// The page size, clamped to 1–200.
    pub fn limit(&self) -> u64 {
        page::clamp_limit(self.limit)
    }

    /// A list ordered by `(timestamp, id)`, newest first.
    pub fn window(self, window: &WindowParams) -> Result<Window, ApiError> {
        let updated_since = window
            .updated_since
            .as_deref()
            .map(|t| {
                DateTime::parse_from_rfc3339(t)
                    .map(|t| t.with_timezone(&Utc))
                    .map_err(|_| {
                        ApiError::invalid("updated_since", "must be an RFC 3339 timestamp")
                    })
            })
            .transpose()?;
        Ok(Window {
            updated_since,
            sort: window.sort()?,
            limit: self.limit(),
            cursor: self.cursor,
        })
    }

    /// A list ordered by id, newest first: the cursor is the last id seen.
    pub fn id_window(&self) -> Result<IdWindow, ApiError> {
        let before = self
            .cursor
            .as_deref()
            .map(|c| {
                c.parse::<i64>()
                    .map_err(|_| ApiError::invalid("cursor", "is not a cursor this API returned"))
            })
            .transpose()?;
        Ok(IdWindow {
            limit: self.limit(),
            before,
        })
    }
}

impl WindowParams {
    pub fn sort(&self) -> Result<SortKey, ApiError> {
        match self.sort.as_deref() {
            None | Some("updated_at") => Ok(SortKey::UpdatedAt),
            Some("created_at") => Ok(SortKey::CreatedAt),
            Some(_) => Err(ApiError::invalid(
                "sort",
                "must be 'updated_at' or 'created_at'",
            )),
        }
    }
}
