//! Lists at the HTTP edge: the query parameters every list takes
//! (`ListParams`, and `WindowParams` for the lists that can be read
//! incrementally), handed to the domain's pages (`domain::page`), which
//! parse them, make the cursors and shape the page (`Page<T>`).

use domain::page::{IdWindow, Window};
pub use domain::page::{Listed, Page};
use serde::Deserialize;
use utoipa::IntoParams;

use crate::http::error::ApiError;

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
        domain::page::clamp_limit(self.limit)
    }

    /// A list ordered by `(timestamp, id)`, newest first.
    pub fn window(self, window: &WindowParams) -> Result<Window, ApiError> {
        Window::parse(
            self.limit,
            self.cursor,
            window.updated_since.as_deref(),
            window.sort.as_deref(),
        )
        .map_err(ApiError::from)
    }

    /// A list ordered by id, newest first.
    pub fn id_window(&self) -> Result<IdWindow, ApiError> {
        IdWindow::parse(self.limit, self.cursor.as_deref()).map_err(ApiError::from)
    }
}
