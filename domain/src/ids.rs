//! Ids of the records one call links together, as distinct types: a deal
//! names an owner, a contact, a company and the lead it came from, all
//! integers in storage, and swapping two of them must be a compile error
//! rather than a wrong link. Columns stay `i64`; these live at the API of
//! the domain calls.
//!
//! ```compile_fail
//! use leadpipe_domain::crm::deal::DealInput;
//! use leadpipe_domain::ids::CompanyId;
//! // A company's id where the contact goes does not compile.
//! let _ = DealInput { contact_id: Some(CompanyId(1)), ..Default::default() };
//! ```
//!
//! ```
//! use leadpipe_domain::crm::deal::DealInput;
//! use leadpipe_domain::ids::ContactId;
//! let _ = DealInput { contact_id: Some(ContactId(1)), ..Default::default() };
//! ```

macro_rules! ids {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord,
            serde::Serialize, serde::Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub i64);

        impl From<$name> for i64 {
            fn from(id: $name) -> i64 {
                id.0
            }
        }

        impl From<$name> for sea_orm::Value {
            fn from(id: $name) -> Self {
                id.0.into()
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.fmt(f)
            }
        }
    )*};
}

ids! {
    /// A lead's id.
    LeadId;
    /// A contact's id.
    ContactId;
    /// A company's id.
    CompanyId;
    /// A principal's id: the owner of a lead or a deal.
    PrincipalId;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_stored_as_its_number() {
        assert_eq!(i64::from(ContactId(7)), 7);
        assert_eq!(
            sea_orm::Value::from(CompanyId(9)),
            sea_orm::Value::from(9i64)
        );
        assert_eq!(PrincipalId(3).to_string(), "3");
    }
}
