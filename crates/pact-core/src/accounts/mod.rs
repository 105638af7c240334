//! Brand customers' accounts: password hashing, TOTP, recovery codes and the
//! lockout rule — plain functions, with `now` passed in where time matters.

pub mod lockout;
pub mod password;
pub mod recovery;
pub mod sign_in;
pub mod totp;
