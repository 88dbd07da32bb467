//! The command line's inputs: flag values and input files read and validated on the host
//! before any GPU work, into the runtime's typed problem descriptions (and, for the
//! checks, the checking crate's host inputs). Every malformed or inconsistent input is an
//! [`attention::InputError`] naming it; `fuzz/` drives these readers.

pub mod attention;
pub mod decode;
pub mod lightning;
