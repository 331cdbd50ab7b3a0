//! Who gets a new lead: what routing knows about sales staff (their team,
//! whether they are away, how many open leads they take: [`staff`]) and the
//! choice itself. The lead drain (`lead::processing`) asks; nothing here
//! writes a lead's owner.

pub mod choice;
pub mod router;
pub mod rules;
pub mod staff;
pub mod waiting;
