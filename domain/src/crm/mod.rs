//! Contacts, companies and deals: what a qualified lead converts into, and
//! what sales keeps working afterwards. Matching is done by the database's
//! unique keys (normalised email, company domain or name), never by a
//! select-then-insert.

pub mod company;
pub mod contact;
pub mod conversion;
pub mod deal;
pub mod normalise;
mod record;
pub mod task;
pub mod timeline;

use crate::error::Error;

/// Trims; `Some("")` becomes `None`.
fn clean(value: Option<String>) -> Option<String> {
    value.map(|v| v.trim().to_owned()).filter(|v| !v.is_empty())
}

fn check_len(field: &str, value: Option<&str>, max: usize) -> Result<(), Error> {
    if value.is_some_and(|v| v.chars().count() > max) {
        return Err(Error::invalid(
            field,
            &format!("must be at most {max} characters"),
        ));
    }
    Ok(())
}
